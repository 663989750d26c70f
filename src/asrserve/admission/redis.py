"""Admission counts in Redis: one backlog per priority class, shared by every API node.

A hash ``{prefix}:admission`` holds ``<class>:jobs`` and ``<class>:audio_s``, and each key's
share as ``<class>@<key id>:jobs`` and ``…:audio_s`` (only while the key holds work). The
check and the increment are two steps, so nodes accepting at the same instant may overshoot
a limit by the requests in flight between them: the bound is approximate by that much. The
leader rebuilds the counts from the job store when it takes the lease, which corrects any
drift left by a node that crashed between accepting a job and counting it.
"""

from __future__ import annotations

from typing import Any, cast

import redis.asyncio as aioredis

from asrserve.admission.base import Admission, Backlog, Held
from asrserve.cluster.base import WorkerRegistry
from asrserve.jobs.models import Job
from asrserve.settings.admission import AdmissionSettings
from asrserve.vocabulary import Priority

# KEYS[1]: the hash; ARGV: the audio seconds, then field pairs (jobs, audio_s) to take one
# job of that many seconds off. An owner's pair (the last, when there are two) is removed
# once it holds nothing.
SUBTRACT = """
for i = 2, #ARGV, 2 do
  local jobs = math.max(tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '0') - 1, 0)
  local audio = math.max(tonumber(redis.call('HGET', KEYS[1], ARGV[i + 1]) or '0') - ARGV[1], 0)
  if i > 2 and jobs == 0 then
    redis.call('HDEL', KEYS[1], ARGV[i], ARGV[i + 1])
  else
    redis.call('HSET', KEYS[1], ARGV[i], jobs, ARGV[i + 1], tostring(audio))
  end
end
return 0
"""


def _fields(priority: Priority, owner: str | None = None) -> tuple[str, str]:
    name = priority.name.lower() if owner is None else f"{priority.name.lower()}@{owner}"
    return f"{name}:jobs", f"{name}:audio_s"


class RedisAdmission(Admission):
    def __init__(
        self,
        settings: AdmissionSettings,
        client: aioredis.Redis,
        prefix: str,
        registry: WorkerRegistry,
    ) -> None:
        super().__init__(settings, registry)
        self._client = client
        self._key = f"{prefix}:admission"
        self._subtract = client.register_script(SUBTRACT)

    async def backlog(self, priority: Priority) -> Backlog:
        return await self._read(_fields(priority))

    async def held(self, priority: Priority, owner: str) -> Backlog:
        return await self._read(_fields(priority, owner))

    async def _read(self, fields: tuple[str, str]) -> Backlog:
        jobs, audio = await self._client.hmget(self._key, list(fields))
        return Backlog(int(jobs or 0), float(audio or 0.0))

    async def added(
        self, priority: Priority, audio_s: float, count: int = 1, owner: str | None = None
    ) -> None:
        pairs = [_fields(priority)] + ([] if owner is None else [_fields(priority, owner)])
        async with self._client.pipeline(transaction=True) as pipe:
            for jobs_field, audio_field in pairs:
                pipe.hincrby(self._key, jobs_field, count)
                pipe.hincrbyfloat(self._key, audio_field, audio_s)
            await pipe.execute()

    async def finished(self, job: Job) -> None:
        args = [repr(job.admitted_s), *_fields(job.priority)]
        if job.owner is not None:
            args += _fields(job.priority, job.owner)
        await self._subtract(keys=[self._key], args=args)

    async def _replace(self, backlogs: dict[Priority, Backlog], held: Held) -> None:
        mapping: dict[str, str] = {}
        counts = [(_fields(p), b) for p, b in backlogs.items()]
        counts += [(_fields(p, owner), b) for (p, owner), b in held.items()]
        for (jobs_field, audio_field), backlog in counts:
            mapping[jobs_field] = str(backlog.jobs)
            mapping[audio_field] = repr(backlog.audio_s)
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.delete(self._key)
            pipe.hset(self._key, mapping=cast(Any, mapping))
            await pipe.execute()
