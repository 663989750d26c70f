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
The helpers here (:func:`transact`, :class:`Docs`) serve the other Redis stores too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

from asrserve.jobs.models import Job, JobStatus, WebhookStatus, new_job_id_at
from asrserve.jobs.store import JobStore, Mutation

T = TypeVar("T")
M = TypeVar("M")
Writer = Callable[[Pipeline], None]
Plan = Callable[[Pipeline], Awaitable[tuple[T, Writer | None]]]
Raw = bytes | str  # what redis-py's types promise; bytes, as the client does not decode
CHUNK = 500  # ids per MGET / per create_many transaction

# KEYS[1]: an index; KEYS[i + 1]: the document of member ARGV[i]. Removes the members whose
# document is gone (checked here, atomically, so an id created again meanwhile keeps its entry).
PRUNE = """
local removed = 0
for i, member in ipairs(ARGV) do
    if redis.call('EXISTS', KEYS[i + 1]) == 0 then
        removed = removed + redis.call('ZREM', KEYS[1], member)
    end
end
return removed
"""


async def transact(client: Redis, keys: Sequence[str], plan: Plan[T]) -> T:
    """Optimistic transaction: WATCH ``keys``, let ``plan`` read (it may WATCH more), then
    queue its writer's commands in one MULTI/EXEC; start again if a watched key changed."""
    async with client.pipeline(transaction=True) as pipe:
        while True:
            try:
                await pipe.watch(*keys)
                result, write = await plan(pipe)
                if write is None:
                    return result
                pipe.multi()  # type: ignore[no-untyped-call]
                write(pipe)
                await pipe.execute()
                return result
            except WatchError:
                continue


def text(value: Raw) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def zrange(
    client: Redis, index: str, start: str | int, end: str | int, **kw: object
) -> list[str]:
    """The members of ``index`` in that range (keywords as for ``Redis.zrange``)."""
    found = cast("list[Raw]", await client.zrange(index, start, end, **kw))  # type: ignore[arg-type]
    return [text(member) for member in found]


def ttl_ms(seconds: float | None) -> int | None:
    return None if seconds is None else max(1, int(seconds * 1000))


class Docs(Generic[M]):
    """The JSON documents of one model, ``<base>:<id>``, and reads through zset indexes."""

    def __init__(self, client: Redis, base: str, parse: Callable[[Raw], M]) -> None:
        self.client = client
        self.base = base
        self._parse = parse
        self._prune = client.register_script(PRUNE)

    def key(self, doc_id: str) -> str:
        return f"{self.base}:{doc_id}"

    async def get(self, doc_id: str) -> M | None:
        raw: Raw | None = await self.client.get(self.key(doc_id))
        return None if raw is None else self._parse(raw)

    async def load(self, index: str, ids: Sequence[str]) -> list[M]:
        """The documents of ``ids`` in that order, pruning from ``index`` those gone."""
        found: list[M] = []
        for start in range(0, len(ids), CHUNK):
            part = ids[start : start + CHUNK]
            raws: list[Raw | None] = await self.client.mget([self.key(i) for i in part])
            missing = [i for i, raw in zip(part, raws, strict=True) if raw is None]
            found += [self._parse(raw) for raw in raws if raw is not None]
            if missing:
                await self._prune(keys=[index, *map(self.key, missing)], args=missing)
        return found

    async def update(
        self,
        doc_id: str,
        mutate: Callable[[M], M | None],
        write: Callable[[Pipeline, M, M], None],
    ) -> M | None:
        """Atomically apply ``mutate`` to the document; ``write`` queues the new one (and its
        index changes). The new document, or None when missing or left as it is."""
        key = self.key(doc_id)

        async def plan(pipe: Pipeline) -> tuple[M | None, Writer | None]:
            raw: Raw | None = await pipe.get(key)
            old = None if raw is None else self._parse(raw)
            new = None if old is None else mutate(old)
            if old is None or new is None:
                return None, None
            return new, lambda tx: write(tx, old, new)

        return await transact(self.client, [key], plan)

    async def members(self, index: str) -> list[M]:
        """Every document of ``index``, in id order."""
        return await self.load(index, await zrange(self.client, index, 0, -1))

    async def page(
        self, index: str, *, limit: int, after: str | None, keep: Callable[[M], bool]
    ) -> list[M]:
        """Newest (highest id) first, ids below ``after``, those that ``keep`` accepts."""
        found: list[M] = []
        start = "+" if after is None else f"({after}"
        while len(found) < limit:
            want = max(limit - len(found), 50)
            ids = await zrange(
                self.client, index, start, "-", desc=True, bylex=True, offset=0, num=want
            )
            found += [doc for doc in await self.load(index, ids) if keep(doc)]
            if len(ids) < want:
                break
            start = f"({ids[-1]}"
        return found[:limit]


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
        if _holds_audio(job) and job.finished_at is not None:
            found[f"{p}:jobs:audio"] = job.finished_at
        return found

    def _write(self, pipe: Pipeline, old: Job | None, new: Job) -> None:
        ttl = self._ttl if _expirable(new) else None
        pipe.set(self._docs.key(new.id), new.model_dump_json(), px=ttl)
        if ttl is not None and new.batch_id is not None:  # outlives the batch's last job
            pipe.pexpire(f"{self._p}:jobs:batch:{new.batch_id}", ttl)
        indexes = self._indexes(new)
        for index in (self._indexes(old) if old else {}).keys() - indexes.keys():
            pipe.zrem(index, new.id)
        for index, score in indexes.items():
            pipe.zadd(index, {new.id: score})

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

    async def batch_counts(self, batch_id: str) -> dict[JobStatus, int]:
        jobs = await self._docs.members(f"{self._p}:jobs:batch:{batch_id}")
        return dict(Counter(job.status for job in jobs))

    async def batch_jobs(self, batch_id: str, *, unfinished: bool = False) -> list[Job]:
        jobs = await self._docs.members(f"{self._p}:jobs:batch:{batch_id}")
        return [job for job in jobs if not (unfinished and job.status.finished)]
