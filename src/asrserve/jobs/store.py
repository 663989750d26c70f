"""The job store protocol. State transitions are written once, here, on top of one
atomic primitive (:meth:`JobStore.update`) that every backend implements."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from asrserve.jobs.models import BatchBacklog, Job, JobError, JobStatus, Progress, WebhookStatus
from asrserve.transcript import Transcript

Mutation = Callable[[Job], Job | None]


class JobStore(ABC):
    # --- primitives each backend provides -------------------------------------------
    @abstractmethod
    async def create(self, job: Job) -> None: ...

    @abstractmethod
    async def get(self, job_id: str) -> Job | None: ...

    @abstractmethod
    async def update(self, job_id: str, mutate: Mutation) -> Job | None:
        """Atomically apply ``mutate``; it returns the new job, or None to leave it as is.

        Returns the stored job after the call when ``mutate`` changed it, else None.
        """

    @abstractmethod
    async def page(
        self,
        *,
        status: JobStatus | None = None,
        limit: int = 20,
        after: str | None = None,
        owner: str | None = None,
    ) -> list[Job]:
        """Newest first; ``after`` is the id of the last job of the previous page;
        ``owner`` keeps only that key's jobs."""

    @abstractmethod
    async def unfinished(self) -> list[Job]: ...

    @abstractmethod
    async def webhooks_pending(self) -> list[Job]: ...

    @abstractmethod
    async def audio_expired(self, finished_before: float) -> list[Job]:
        """Finished jobs whose own uploaded audio is still on disk."""

    @abstractmethod
    async def batch_counts(self, batch_id: str) -> dict[JobStatus, int]:
        """How many of a batch's jobs are in each status."""

    @abstractmethod
    async def batch_jobs(
        self, batch_id: str, *, unfinished: bool = False, limit: int | None = None
    ) -> list[Job]:
        """A batch's jobs in id order (only the queued or running ones with ``unfinished``;
        the first ``limit`` of them)."""

    @abstractmethod
    async def batch_backlog(self, batch_id: str) -> BatchBacklog:
        """A batch's unfinished work, read without loading its finished or queued jobs
        (SQLite sums in place; Redis keeps the sum beside the batch's counts)."""

    async def update_many(self, job_ids: Sequence[str], mutate: Mutation) -> list[Job]:
        """:meth:`update` each job; the ones ``mutate`` changed. A backend may do it in one
        transaction (SQLite)."""
        changed = [await self.update(job_id, mutate) for job_id in job_ids]
        return [job for job in changed if job is not None]

    async def create_many(self, jobs: Sequence[Job]) -> None:
        """Create the jobs not stored yet (safe to repeat after a crash)."""
        for job in jobs:
            if await self.get(job.id) is None:
                await self.create(job)

    async def trim(self, created_before: float) -> int:
        """Retention: drop what is kept of jobs created before ``created_before`` beyond
        their own expiry (Redis: index entries). Nothing to do in SQLite, which keeps rows."""
        return 0

    async def close(self) -> None:
        return None

    # --- transitions (template methods) ---------------------------------------------
    async def start(self, job_id: str) -> Job | None:
        """queued/running → running, counting the attempt; None if the job is finished."""

        def mutate(job: Job) -> Job | None:
            if job.status.finished:
                return None
            return job.model_copy(
                update={
                    "status": JobStatus.RUNNING,
                    "started_at": time.time(),
                    "attempts": job.attempts + 1,
                    "progress": None,  # a new attempt starts over
                }
            )

        return await self.update(job_id, mutate)

    async def requeue(self, job_id: str, attempt: int) -> Job | None:
        """running → queued, ``attempt`` not counted (handed back at shutdown). Nothing
        changes unless ``attempt`` is the job's latest, so a caller that was cancelled
        before its start was stored cannot take back another worker's attempt."""

        def mutate(job: Job) -> Job | None:
            if job.status is not JobStatus.RUNNING or job.attempts != attempt:
                return None
            attempts = max(job.attempts - 1, 0)
            return job.model_copy(
                update={"status": JobStatus.QUEUED, "started_at": None, "attempts": attempts}
            )

        return await self.update(job_id, mutate)

    async def report(self, job_id: str, progress: Progress) -> Job | None:
        """Record a running job's progress; None (nothing written) once it has ended."""

        def mutate(job: Job) -> Job | None:
            if job.status is not JobStatus.RUNNING:
                return None
            return job.model_copy(update={"progress": progress})

        return await self.update(job_id, mutate)

    async def succeed(self, job_id: str, result: Transcript) -> Job | None:
        """Stores the result once: a second completion of the same job is a no-op (None)."""

        def done(job: Job) -> Progress | None:  # every window done; the text is in the result
            if job.progress is None:
                return None
            total = job.progress
            return total.model_copy(
                update={
                    "chunks_done": total.chunks_total,
                    "audio_done_s": total.audio_total_s,
                    "updated_at": time.time(),
                    "segments": (),
                }
            )

        return await self._finish(
            job_id,
            {"status": JobStatus.SUCCEEDED, "result": result, "audio_duration": result.duration},
            progress=done,
        )

    async def fail(self, job_id: str, error: JobError) -> Job | None:
        return await self._finish(job_id, {"status": JobStatus.FAILED, "error": error})

    async def cancel(self, job_id: str) -> Job | None:
        return await self._finish(job_id, {"status": JobStatus.CANCELLED})

    async def cancel_many(self, job_ids: Sequence[str]) -> list[Job]:
        """Cancel those of the jobs not finished; the ones cancelled."""
        return await self.update_many(job_ids, _finishing({"status": JobStatus.CANCELLED}))

    async def set_duration(self, job_id: str, seconds: float) -> Job | None:
        return await self.update(job_id, lambda j: j.model_copy(update={"audio_duration": seconds}))

    async def record_webhook(
        self, job_id: str, status: WebhookStatus, error: str | None
    ) -> Job | None:
        def mutate(job: Job) -> Job:
            return job.model_copy(
                update={
                    "webhook_status": status,
                    "webhook_attempts": job.webhook_attempts + 1,
                    "webhook_last_error": error,
                }
            )

        return await self.update(job_id, mutate)

    async def forget_audio(self, job_id: str) -> Job | None:
        return await self.update(job_id, lambda j: j.model_copy(update={"audio_path": ""}))

    async def _finish(
        self,
        job_id: str,
        changes: dict[str, object],
        progress: Callable[[Job], Progress | None] = lambda job: None,
    ) -> Job | None:
        return await self.update(job_id, _finishing(changes, progress))


def _finishing(
    changes: dict[str, object],
    progress: Callable[[Job], Progress | None] = lambda job: None,
) -> Mutation:
    """A final state once; the progress kept is ``progress`` of the job (a failed or
    cancelled job keeps none: its partial text is no answer)."""

    def mutate(job: Job) -> Job | None:
        if job.status.finished:
            return None
        webhook = WebhookStatus.PENDING if job.callback_url else None
        return job.model_copy(
            update={
                **changes,
                "finished_at": time.time(),
                "webhook_status": webhook,
                "progress": progress(job),
            }
        )

    return mutate
