"""What the API does with a request: store the audio, record the job, enqueue, await."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from asrserve.admission import Admission
from asrserve.audio.errors import AudioError
from asrserve.audio.probes import Probes
from asrserve.auth import quota
from asrserve.auth.keys import KeyStore
from asrserve.auth.principal import OPEN, Principal
from asrserve.backends.backend import Backend
from asrserve.batcher.recording import TrafficRecorder
from asrserve.blobs.references import drop_references, keep_references
from asrserve.errors import DeadlineExceeded, InvalidRequest, NotFound, StoreUnavailable, shown
from asrserve.events import JobEvents
from asrserve.jobs.models import Job, JobStatus, new_job_id
from asrserve.jobs.store import JobStore
from asrserve.languages import ANY_LANGUAGE, LanguageRule
from asrserve.outbound import BlockedUrl, InvalidUrl, check_url
from asrserve.queue.base import Queue
from asrserve.requests import TranscriptionRequest, check_chunking
from asrserve.service.files import ReceivedFile
from asrserve.service.references import probe_references
from asrserve.service.signing import Signer
from asrserve.settings import MIB, Settings
from asrserve.settings.webhooks import WebhookSettings
from asrserve.vocabulary import Priority
from asrserve.waiting import wait_event

log = logging.getLogger(__name__)
T = TypeVar("T")


class Service:
    def __init__(
        self, settings: Settings, backend: Backend, recorder: TrafficRecorder | None = None
    ) -> None:
        self.settings = settings
        self.store: JobStore = backend.store
        self.queue: Queue = backend.queue
        self.events: JobEvents = backend.events
        self.keys: KeyStore = backend.keys
        self.admission: Admission = backend.admission
        self.blobs = backend.blobs
        self.recorder = recorder
        self.probes = Probes(settings.probe_processes, settings.probe_memory_mb * MIB)
        self.signer = Signer.from_settings(settings.webhook_signing_key, settings.shared_root)

    def new_upload_path(self) -> tuple[str, Path]:
        job_id = new_job_id()
        return job_id, self.settings.audio_dir / job_id

    async def submit(
        self,
        job_id: str,
        upload: ReceivedFile,
        request: TranscriptionRequest,
        priority: Priority,
        principal: Principal = OPEN,
    ) -> Job:
        """Validate the stored upload, admit it (queue limits, the caller's quota), then
        record and enqueue the job (durable on return)."""
        options, callback_url = request.options, request.callback_url
        if upload.path is None:
            raise InvalidRequest("a 'file' part with the audio is required", param="file")
        if upload.size == 0:
            upload.remove()
            raise InvalidRequest("the uploaded file is empty", param="file", code="empty_file")
        try:
            if options.diarization is not None:  # refused before it is charged or stored
                known, longest = options.diarization.known, self.settings.max_audio_seconds
                folder, tenant = upload.path.parent, principal.owner or ""
                await probe_references(self.probes, known, folder, longest, tenant)
            duration = await self._admit(upload.path, priority, callback_url, principal, request)
        except AudioError as exc:
            upload.remove()
            exc.param = "file"
            raise
        except BaseException:
            upload.remove()
            raise
        job = new_job(
            job_id,
            request,
            priority,
            filename=upload.filename,
            audio_bytes=upload.size,
            duration=duration,
            owner=principal.owner,
            tenant=not principal.admin,
        )
        try:
            job = job.model_copy(
                update={"audio_path": await self.blobs.keep(job_id, upload.path, upload.size)}
            )
            job = await self.with_references_kept(job, upload.path.parent)
            await self.store.create(job)
        except BaseException:  # nothing stored: nothing may stay behind
            upload.remove()
            with contextlib.suppress(Exception):  # Redis may be what failed
                await asyncio.shield(self.blobs.delete(job.audio_path))
                await asyncio.shield(drop_references(self.blobs, job.known_speakers))
            raise
        # Were this put lost (a crash, the broker gone), the job is still unfinished in the
        # store and is queued again when a worker next starts.
        await self.queue.put(job.id, priority)
        await self.admission.added(priority, job.admitted_s, owner=job.owner)
        if self.recorder is not None:
            self.recorder.arrival(job)
        log.info(
            "job queued",
            extra={
                "job_id": job.id,
                "priority": priority.name.lower(),
                "audio_s": duration,
                "bytes": upload.size,
                "owner": job.owner,
            },
        )
        return job

    async def with_references_kept(self, job: Job, folder: Path) -> Job:
        """``job`` with its known speakers' references kept as blobs (written in
        ``folder`` first), not in its stored options."""
        diarization = job.options.diarization
        if diarization is None or not diarization.known:
            return job
        kept = await keep_references(self.blobs, job.id, diarization.known, folder)
        options = job.options.model_copy(
            update={"diarization": diarization.model_copy(update={"known": kept})}
        )
        return job.model_copy(update={"options": options})

    async def _admit(
        self,
        path: Path,
        priority: Priority,
        callback_url: str | None,
        principal: Principal,
        request: TranscriptionRequest,
    ) -> float | None:
        """The probed duration, once the request fits the limits and the caller's quota."""
        limit, tenant = self.settings.max_audio_seconds, principal.owner or ""
        duration = await self.probes.probe(path, limit, tenant)
        check_chunking(request, duration)
        if callback_url:
            check_callback(callback_url, self.settings)
        await self.admission.admit(priority, duration or 0.0, owner=principal.owner)
        await quota.charge(self.keys, principal, duration or 0.0)
        return duration

    async def submit_interactive(
        self, job_id: str, upload: ReceivedFile, request: TranscriptionRequest, principal: Principal
    ) -> tuple[Job, float]:
        """A synchronous request's job, submitted at interactive priority, and the deadline
        it has: its own ``deadline_s`` within ``ASRSERVE_SYNC_TIMEOUT_S``."""
        timeout = min(request.deadline_s or math.inf, self.settings.sync_timeout_s)
        bounded = dataclasses.replace(request, deadline_s=timeout)
        job = await self.submit(job_id, upload, bounded, Priority.INTERACTIVE, principal)
        return job, timeout

    async def finished_within(self, job: Job, timeout: float) -> Job:
        """The job once finished, or :class:`DeadlineExceeded` once ``timeout`` has passed
        (the worker fails the job with the same code when it drops its chunks: whichever
        side notices first, the caller sees one answer)."""
        done = await self.wait(job.id, timeout + 1.0)
        if done is None or not done.status.finished:
            raise DeadlineExceeded(f"transcription did not finish within {timeout:g} s")
        return done

    async def probe(self, path: Path, tenant: str) -> float | None:
        """The stated duration of the audio at ``path`` (None: not stated), probed in a
        process of the pool as ``tenant``'s; :class:`AudioError` for audio it refuses."""
        return await self.probes.probe(path, self.settings.max_audio_seconds, tenant)

    async def charge(self, owner: str | None, seconds: float) -> None:
        """``seconds`` of audio against the daily quota of the key ``owner`` (None, or a key
        no longer stored: nobody's), or :class:`QuotaExceeded`."""
        key = await self.keys.get(owner) if owner else None
        if key is not None:
            await quota.charge(self.keys, Principal.of(key, self.settings), seconds)

    async def languages_of(self, owner: str | None) -> LanguageRule:
        """The languages the key ``owner`` allows (any: no key)."""
        key = await self.keys.get(owner) if owner else None
        return ANY_LANGUAGE if key is None else key.language_rule

    async def batch_jobs(self, batch_id: str, *, unfinished: bool = False) -> list[Job]:
        """A Batch API batch's jobs in id order (only the queued or running ones with
        ``unfinished``)."""
        return await self.store.batch_jobs(batch_id, unfinished=unfinished)

    async def batch_counts(self, batch_id: str) -> dict[JobStatus, int]:
        """How many of a batch's jobs are in each status."""
        return await self.store.batch_counts(batch_id)

    async def cancel_batch_jobs(self, batch_id: str, step: int) -> bool:
        """Cancel the next ``step`` unfinished jobs of a batch in one store call; whether
        there may be more."""
        jobs = await self.store.batch_jobs(batch_id, unfinished=True, limit=step)
        await self.cancel_many([job.id for job in jobs])
        return len(jobs) == step

    async def enqueue_offline(self, jobs: Sequence[Job], owner: str | None) -> None:
        """Record and queue a batch's jobs (the longest first, so that the batch's tail is
        short), counted in the offline class's backlog for ``owner``."""
        await self.store.create_many(list(jobs))
        longest_first = sorted(jobs, key=lambda job: -(job.audio_duration or 0.0))
        await self.queue.put_many([job.id for job in longest_first], Priority.OFFLINE)
        seconds = sum(job.admitted_s for job in jobs)
        await self.admission.added(Priority.OFFLINE, seconds, count=len(jobs), owner=owner)

    async def job(self, job_id: str, principal: Principal, wait: float = 0.0) -> Job:
        """The job if ``principal`` may see it (with ``wait``: once it has finished, or as
        it stands ``wait`` seconds on); ``job_not_found`` otherwise, as if it did not exist."""
        job = await (self.wait(job_id, wait) if wait else self.store.get(job_id))
        return principal.visible(job, job_not_found(job_id))

    async def jobs(
        self,
        owner: str | None,
        *,
        limit: int,
        status: JobStatus | None = None,
        after: str | None = None,
    ) -> list[Job]:
        """A page of ``owner``'s jobs (None: everyone's), newest first, after the job ``after``."""
        return await self.store.page(status=status, limit=limit, after=after, owner=owner)

    async def cancel_visible(self, job_id: str, principal: Principal) -> Job:
        """Cancel a job ``principal`` may see that has not finished; the job as it stands."""
        await self.job(job_id, principal)
        return principal.visible(await self.cancel(job_id), job_not_found(job_id))

    async def wait(self, job_id: str, timeout: float) -> Job | None:
        """The job once finished, or as it stands when ``timeout`` passes."""
        return await self.wait_until(
            job_id, lambda: self.store.get(job_id), lambda job: job.status.finished, timeout
        )

    async def wait_until(
        self,
        key: str,
        read: Callable[[], Awaitable[T | None]],
        done: Callable[[T], bool],
        timeout: float,
    ) -> T | None:
        """What ``read`` returns once ``done`` says so (or it is None), or as it stands when
        ``timeout`` passes; read again whenever the events of ``key`` (a job's or a batch's
        id) say it may have changed. A store that is down at the first read is the caller's
        answer; later, the last value read stands until the store is back (its return
        wakes every waiter: events/redis.py)."""
        deadline = time.monotonic() + timeout
        with self.events.subscribe(key) as changed:  # before the read: no change missed
            value = await read()
            while value is not None and not done(value):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                await wait_event(changed, remaining)
                changed.clear()
                with contextlib.suppress(StoreUnavailable):
                    value = await read()
        return value

    async def follow(self, job_id: str, timeout: float, tick: float) -> AsyncIterator[Job]:
        """The job now, then each time it may have changed (its progress or its status) and
        at least every ``tick`` seconds, until it has finished (the last one yielded) or
        ``timeout`` has passed. Nothing is yielded if there is no such job. Past the first
        read, a store that is down yields the job as last read."""
        deadline = time.monotonic() + timeout
        with self.events.subscribe(job_id) as changed:
            job = await self.store.get(job_id)
            while job is not None:
                yield job
                remaining = deadline - time.monotonic()
                if job.status.finished or remaining <= 0:
                    return
                await wait_event(changed, min(remaining, tick))
                changed.clear()
                with contextlib.suppress(StoreUnavailable):
                    job = await self.store.get(job_id)

    async def cancel(self, job_id: str) -> Job | None:
        """Cancel a job that has not finished; returns None if there is no such job."""
        job = await self.store.cancel(job_id)
        if job is not None:
            await self.admission.finished(job)
            self.events.cancelled(job_id)
            return job
        return await self.store.get(job_id)

    async def cancel_many(self, job_ids: Sequence[str]) -> int:
        """Cancel those of the jobs that have not finished (one store call); how many."""
        cancelled = await self.store.cancel_many(job_ids)
        for priority in {job.priority for job in cancelled}:  # no worker need walk them
            await self.queue.discard(
                [job.id for job in cancelled if job.priority is priority], priority
            )
        for job in cancelled:
            await self.admission.finished(job)
            self.events.cancelled(job.id)
        return len(cancelled)


def job_not_found(job_id: str) -> NotFound:
    return NotFound(f"no job '{shown(job_id)}'", param="job_id", code="job_not_found")


def check_callback(url: str, settings: WebhookSettings, param: str = "callback_url") -> None:
    """:class:`InvalidRequest` for a callback URL the service may not call (see
    :mod:`asrserve.outbound`): ``invalid_callback_url`` if malformed, ``callback_not_allowed``
    if blocked."""
    try:
        check_url(url, settings.webhook_allow)
    except InvalidUrl as exc:
        message = f"{param} is not a usable URL: {exc}"
        raise InvalidRequest(message, param=param, code="invalid_callback_url") from None
    except BlockedUrl as exc:
        raise InvalidRequest(str(exc), param=param, code="callback_not_allowed") from None


def new_job(
    job_id: str,
    request: TranscriptionRequest,
    priority: Priority,
    *,
    filename: str,
    audio_bytes: int,
    duration: float | None,
    owner: str | None,
    tenant: bool,
    audio_path: str = "",
    batch_id: str | None = None,
) -> Job:
    """A job for one transcription request, as every way in records it: the request's
    options, webhook, deadline (from now) and keep_alive, and the admitted audio seconds.
    ``tenant``: its keep_alive may not pin a model past the default (an admin's may); a
    Batch API line's job (``batch_id``) reads its stored file's audio and never deletes it."""
    deadline_s = request.deadline_s
    return Job(
        id=job_id,
        priority=priority,
        options=request.options,
        filename=filename,
        audio_path=audio_path,
        audio_bytes=audio_bytes,
        audio_duration=duration,
        admitted_s=duration or 0.0,
        callback_url=request.callback_url,
        deadline_at=None if deadline_s is None else time.time() + deadline_s,
        batch_id=batch_id,
        owns_audio=batch_id is None,
        owner=owner,
        keep_alive=request.keep_alive,
        keep_alive_floor=tenant,
    )
