"""Admission counts in Redis: one backlog per priority class, shared by every API node.

A hash ``{prefix}:admission`` holds ``<class>:jobs`` and ``<class>:audio_s``. The check
and the increment are two steps, so nodes accepting at the same instant may overshoot a
limit by the requests in flight between them: the bound is approximate by that much. The
leader rebuilds the counts from the job store when it takes the lease, which corrects any
drift left by a node that crashed between accepting a job and counting it.
"""

from __future__ import annotations

from typing import Any, cast

import redis.asyncio as aioredis

from asrserve.admission.base import Admission, Backlog
from asrserve.cluster.base import WorkerRegistry
from asrserve.jobs.models import Job, Priority
from asrserve.settings import Settings

SUBTRACT = """
local jobs = math.max(tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') - 1, 0)
local audio = math.max(tonumber(redis.call('HGET', KEYS[1], ARGV[2]) or '0') - ARGV[3], 0)
redis.call('HSET', KEYS[1], ARGV[1], jobs, ARGV[2], tostring(audio))
return jobs
"""


def _fields(priority: Priority) -> tuple[str, str]:
    name = priority.name.lower()
    return f"{name}:jobs", f"{name}:audio_s"


class RedisAdmission(Admission):
    def __init__(
        self, settings: Settings, client: aioredis.Redis, registry: WorkerRegistry
    ) -> None:
        super().__init__(settings, registry)
        self._client = client
        self._key = f"{settings.redis_prefix}:admission"
        self._subtract = client.register_script(SUBTRACT)

    async def backlog(self, priority: Priority) -> Backlog:
        jobs, audio = await self._client.hmget(self._key, list(_fields(priority)))
        return Backlog(int(jobs or 0), float(audio or 0.0))

    async def added(self, priority: Priority, audio_s: float, count: int = 1) -> None:
        jobs_field, audio_field = _fields(priority)
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hincrby(self._key, jobs_field, count)
            pipe.hincrbyfloat(self._key, audio_field, audio_s)
            await pipe.execute()

    async def finished(self, job: Job) -> None:
        jobs_field, audio_field = _fields(job.priority)
        args = [jobs_field, audio_field, repr(job.admitted_s)]
        await self._subtract(keys=[self._key], args=args)

    async def _replace(self, backlogs: dict[Priority, Backlog]) -> None:
        mapping: dict[str, str] = {}
        for priority, backlog in backlogs.items():
            jobs_field, audio_field = _fields(priority)
            mapping[jobs_field] = str(backlog.jobs)
            mapping[audio_field] = repr(backlog.audio_s)
        await self._client.hset(self._key, mapping=cast(Any, mapping))
