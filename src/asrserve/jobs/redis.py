"""Jobs in Redis: one JSON document per job, sorted-set indexes written in the same MULTI.

Key layout (``P`` is the deployment's prefix; every zset member is a job id):

- ``P:job:<id>``            the job, ``Job.model_dump_json()``; once finished, with no webhook
  pending and no uploaded audio left to sweep, it expires after ``retention_s``
- ``P:jobs``                 every job, score 0 (lexical order = creation order)
- ``P:jobs:owner:<owner>``   the jobs of one API key, score 0
- ``P:jobs:unfinished``      queued or running jobs, score 0
- ``P:jobs:webhooks``        jobs whose webhook is pending, score 0
- ``P:jobs:batch:<batch>``   the jobs of one batch, score 0
- ``P:jobs:audio``           finished jobs owning audio still on disk, scored by ``finished_at``

Index entries whose document has expired are skipped by readers and removed when found;
``trim`` (the leader's retention sweep) drops the entries of jobs created before a cutoff
from the all-jobs and per-owner indexes, and a batch's index expires with its last job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from asrserve.drivers.redis_documents import (
    CHUNK,
    Docs,
    Raw,
    Writer,
    text,
    transact,
    ttl_ms,
    zrange,
)
from asrserve.jobs.models import BatchBacklog, Job, JobStatus, WebhookStatus, new_job_id_at
from asrserve.jobs.store import JobStore, Mutation

# Fields of a batch's counts hash besides its statuses: present from its first job on,
# and the audio seconds its queued jobs were admitted with.
KEPT, QUEUED_S = "kept", "queued_s"


def _holds_audio(job: Job) -> bool:
    return job.finished_at is not None and job.audio_path != "" and job.owns_audio


def _expirable(job: Job) -> bool:
    pending = job.webhook_status is WebhookStatus.PENDING
    return job.status.finished and not pending and not _holds_audio(job)


class RedisJobStore(JobStore):
    def __init__(self, client: Redis, prefix: str, retention_s: float | None = None) -> None:
        self._client = client
        self._p = prefix
        self._ttl = ttl_ms(retention_s)
        self._docs = Docs(client, f"{prefix}:job", Job.model_validate_json)

    def _indexes(self, job: Job) -> dict[str, float]:
        """The zsets that hold ``job``, with its score in each."""
        p = self._p
        found = {f"{p}:jobs": 0.0}
        if job.owner is not None:
            found[f"{p}:jobs:owner:{job.owner}"] = 0.0
        if not job.status.finished:
            found[f"{p}:jobs:unfinished"] = 0.0
        if job.webhook_status is WebhookStatus.PENDING:
            found[f"{p}:jobs:webhooks"] = 0.0
        if job.batch_id is not None:
            found[f"{p}:jobs:batch:{job.batch_id}"] = 0.0
            if job.status is JobStatus.RUNNING:
                found[f"{p}:jobs:batch:{job.batch_id}:running"] = 0.0
        if _holds_audio(job) and job.finished_at is not None:
            found[f"{p}:jobs:audio"] = job.finished_at
        return found

    def _write(self, pipe: Pipeline, old: Job | None, new: Job) -> None:
        ttl = self._ttl if _expirable(new) else None
        pipe.set(self._docs.key(new.id), new.model_dump_json(), px=ttl)
        if new.batch_id is not None:
            self._count(pipe, old, new, ttl)
        indexes = self._indexes(new)
        for index in (self._indexes(old) if old else {}).keys() - indexes.keys():
            pipe.zrem(index, new.id)
        for index, score in indexes.items():
            pipe.zadd(index, {new.id: score})

    def _count(self, pipe: Pipeline, old: Job | None, new: Job, ttl: int | None) -> None:
        """Keep the batch's jobs counted by status, in the transaction that moves one, so
        the Batch API reads its counts without loading its jobs, and the audio of its
        queued jobs (``QUEUED_S``) likewise. A batch created before the counts were kept
        has no ``KEPT`` field: its counts are read from its jobs."""
        counts = f"{self._p}:jobs:batch:{new.batch_id}:counts"
        if old is None:
            pipe.hset(counts, KEPT, 1)
        if old is None or old.status is not new.status:
            if old is not None:
                pipe.hincrby(counts, old.status.value, -1)
            pipe.hincrby(counts, new.status.value, 1)
            if old is not None and old.status is JobStatus.QUEUED:
                pipe.hincrbyfloat(counts, QUEUED_S, -old.admitted_s)
            if new.status is JobStatus.QUEUED:
                pipe.hincrbyfloat(counts, QUEUED_S, new.admitted_s)
        if ttl is not None:  # both outlive the batch's last job
            pipe.pexpire(f"{self._p}:jobs:batch:{new.batch_id}", ttl)
            pipe.pexpire(counts, ttl)

    async def _insert(self, jobs: Sequence[Job]) -> int:
        """Create the jobs whose id is not stored yet (the first of repeated ids); how many."""
        unique = list({job.id: job for job in reversed(jobs)}.values())[::-1]
        keys = [self._docs.key(job.id) for job in unique]

        async def plan(pipe: Pipeline) -> tuple[int, Writer | None]:
            stored: list[Raw | None] = await pipe.mget(keys)
            fresh = [job for job, raw in zip(unique, stored, strict=True) if raw is None]

            def write(tx: Pipeline) -> None:
                for job in fresh:
                    self._write(tx, None, job)

            return len(fresh), (write if fresh else None)

        return await transact(self._client, keys, plan)

    async def create(self, job: Job) -> None:
        if not await self._insert([job]):
            raise ValueError(f"job {job.id} already exists")

    async def create_many(self, jobs: Sequence[Job]) -> None:
        for start in range(0, len(jobs), CHUNK):
            await self._insert(jobs[start : start + CHUNK])

    async def get(self, job_id: str) -> Job | None:
        return await self._docs.get(job_id)

    async def update(self, job_id: str, mutate: Mutation) -> Job | None:
        return await self._docs.update(job_id, mutate, self._write)

    async def page(
        self,
        *,
        status: JobStatus | None = None,
        limit: int = 20,
        after: str | None = None,
        owner: str | None = None,
    ) -> list[Job]:
        index = f"{self._p}:jobs"
        if owner is not None:
            index = f"{self._p}:jobs:owner:{owner}"
        elif status is not None and not status.finished:
            index = f"{self._p}:jobs:unfinished"

        def keep(job: Job) -> bool:
            return (status is None or job.status is status) and (
                owner is None or job.owner == owner
            )

        return await self._docs.page(index, limit=limit, after=after, keep=keep)

    async def unfinished(self) -> list[Job]:
        jobs = await self._docs.members(f"{self._p}:jobs:unfinished")
        return [job for job in jobs if not job.status.finished]

    async def webhooks_pending(self) -> list[Job]:
        jobs = await self._docs.members(f"{self._p}:jobs:webhooks")
        return [job for job in jobs if job.webhook_status is WebhookStatus.PENDING]

    async def audio_expired(self, finished_before: float) -> list[Job]:
        index = f"{self._p}:jobs:audio"
        ids = await zrange(self._client, index, "-inf", f"({finished_before!r}", byscore=True)
        jobs = await self._docs.load(index, sorted(ids))
        return [j for j in jobs if _holds_audio(j) and (j.finished_at or 0) < finished_before]

    async def trim(self, created_before: float) -> int:
        """Drop index entries of jobs created before ``created_before`` (their documents
        have expired long since): the all-jobs index and every owner's."""
        bound = f"({new_job_id_at(created_before)}"
        removed = int(await self._client.zremrangebylex(f"{self._p}:jobs", "-", bound))
        async for index in self._client.scan_iter(match=f"{self._p}:jobs:owner:*", count=500):
            removed += int(await self._client.zremrangebylex(index, "-", bound))
        return removed

    async def _kept(self, batch_id: str) -> dict[str, float] | None:
        """The batch's counts hash, or None for a batch from before it was kept."""
        raw: dict[Raw, Raw] = await self._client.hgetall(f"{self._p}:jobs:batch:{batch_id}:counts")
        kept = {text(field): float(value) for field, value in raw.items()}
        return kept if KEPT in kept else None

    async def batch_counts(self, batch_id: str) -> dict[JobStatus, int]:
        kept = await self._kept(batch_id)
        if kept is None:
            jobs = await self._docs.members(f"{self._p}:jobs:batch:{batch_id}")
            return dict(Counter(job.status for job in jobs))
        return {status: int(kept[status]) for status in JobStatus if kept.get(status, 0) > 0}

    async def batch_jobs(
        self, batch_id: str, *, unfinished: bool = False, limit: int | None = None
    ) -> list[Job]:
        index = f"{self._p}:jobs:batch:{batch_id}"
        if not unfinished:
            jobs = await self._docs.members(index)
            return jobs if limit is None else jobs[:limit]
        # the batch's ids among all unfinished jobs, intersected in Redis: the batch's
        # finished jobs are never loaded
        found = cast("list[Raw]", await self._client.zinter([index, f"{self._p}:jobs:unfinished"]))
        ids = sorted(text(member) for member in found)[:limit]
        return [job for job in await self._docs.load(index, ids) if not job.status.finished]

    async def batch_backlog(self, batch_id: str) -> BatchBacklog:
        kept = await self._kept(batch_id)
        if kept is not None:
            running = await self._docs.members(f"{self._p}:jobs:batch:{batch_id}:running")
            queued = max(kept.get(QUEUED_S, 0.0), 0.0)  # a sum of floats: may end at -1e-12
            return BatchBacklog(queued, [job for job in running if job.status is JobStatus.RUNNING])
        jobs = await self.batch_jobs(batch_id, unfinished=True)
        queued = sum(job.admitted_s for job in jobs if job.status is JobStatus.QUEUED)
        return BatchBacklog(queued, [job for job in jobs if job.status is JobStatus.RUNNING])
