"""Bounded admission: how much unfinished work each priority class may hold.

Past the limits a new request gets ``429`` with a ``Retry-After`` estimated from the
measured throughput: the time the class needs to drain the excess. The embedded counts are
kept in memory, updated as jobs are accepted and finish, and rebuilt from the store at
start-up; :class:`asrserve.distributed.admission.RedisAdmission` keeps them in Redis so that
every API node sees one backlog.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from asrserve.api.errors import ApiError
from asrserve.jobs.models import Job, Priority
from asrserve.settings import Settings

FALLBACK_THROUGHPUT = 10.0  # audio s per s, until a batch has been measured
MAX_RETRY_AFTER_S = 3600


@dataclass
class Backlog:
    jobs: int = 0
    audio_s: float = 0.0


class Admission:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        # measured audio seconds per second at full load; set once the scheduler runs
        self.throughput: Callable[[], float | None] = lambda: None
        self._backlog = {priority: Backlog() for priority in Priority}

    async def reset(self, jobs: Iterable[Job]) -> None:
        """Start from the unfinished jobs in the store."""
        self._backlog = {priority: Backlog() for priority in Priority}
        for job in jobs:
            await self.added(job.priority, job.admitted_s)

    async def admit(self, priority: Priority, audio_s: float, count: int = 1) -> None:
        """Raise 429 if ``count`` more jobs of ``audio_s`` seconds in all would not fit."""
        backlog = await self._current(priority)
        max_jobs, max_audio = self._limits(priority)
        extra_jobs = backlog.jobs + count - max_jobs
        extra_audio = backlog.audio_s + audio_s - max_audio
        if extra_jobs <= 0 and extra_audio <= 0:
            return
        per_job = backlog.audio_s / backlog.jobs if backlog.jobs else audio_s / count
        excess = max(extra_audio, extra_jobs * per_job, 0.0)
        rate = await self.measured_throughput() or FALLBACK_THROUGHPUT
        retry = min(max(math.ceil(excess / rate), 1), MAX_RETRY_AFTER_S)
        name = priority.name.lower()
        message = (
            f"the {name} queue is full ({backlog.jobs} jobs, {backlog.audio_s:.0f} s of audio "
            f"waiting); retry in about {retry} s"
        )
        raise ApiError(429, message, code="queue_full", headers={"Retry-After": str(retry)})

    async def measured_throughput(self) -> float | None:
        return self.throughput()

    async def _current(self, priority: Priority) -> Backlog:
        return self._backlog[priority]

    async def added(self, priority: Priority, audio_s: float, count: int = 1) -> None:
        backlog = self._backlog[priority]
        backlog.jobs += count
        backlog.audio_s += audio_s

    async def finished(self, job: Job) -> None:
        """Take off what :meth:`added` counted for the job: ``job.admitted_s``, never its
        (decoded) duration, which may differ from the duration stated at intake."""
        backlog = self._backlog[job.priority]
        backlog.jobs = max(backlog.jobs - 1, 0)
        backlog.audio_s = max(backlog.audio_s - job.admitted_s, 0.0)

    async def view(self) -> dict[str, dict[str, float]]:
        backlogs = {p: await self._current(p) for p in Priority}
        return {
            p.name.lower(): {"jobs": b.jobs, "audio_s": round(b.audio_s, 1)}
            for p, b in backlogs.items()
        }

    def _limits(self, priority: Priority) -> tuple[int, float]:
        settings = self._settings
        if priority is Priority.OFFLINE:
            return settings.batch_api_max_queued_requests, math.inf
        return settings.max_queued_jobs, settings.max_queued_audio_s
