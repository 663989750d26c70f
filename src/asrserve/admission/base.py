"""Bounded admission: how much unfinished work each priority class may hold.

Past the limits a new request is refused with :class:`QueueFull` and a retry-after
estimated from the measured throughput: the time the class needs to drain the excess. The
counts are updated as jobs are accepted and finish, and rebuilt from the store when the
leader's duties start. ``local.py`` keeps them in memory (embedded); ``redis.py`` keeps
them in Redis so that every API node sees one backlog.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from asrserve.cluster.base import WorkerRegistry
from asrserve.errors import QueueFull
from asrserve.jobs.models import Job, Priority
from asrserve.settings import Settings

FALLBACK_THROUGHPUT = 10.0  # audio s per s, until a batch has been measured
MAX_RETRY_AFTER_S = 3600


@dataclass
class Backlog:
    jobs: int = 0
    audio_s: float = 0.0


def tally(jobs: Iterable[Job]) -> dict[Priority, Backlog]:
    """What ``jobs`` (the unfinished ones) count for, per class."""
    totals = {priority: Backlog() for priority in Priority}
    for job in jobs:
        totals[job.priority].jobs += 1
        totals[job.priority].audio_s += job.admitted_s
    return totals


class Admission(ABC):
    def __init__(self, settings: Settings, registry: WorkerRegistry) -> None:
        self._settings = settings
        self._registry = registry
        # measured audio seconds per second at full load; set once the scheduler runs
        self.throughput: Callable[[], float | None] = lambda: None

    @abstractmethod
    async def backlog(self, priority: Priority) -> Backlog:
        """What the class holds now."""

    @abstractmethod
    async def added(self, priority: Priority, audio_s: float, count: int = 1) -> None:
        """``count`` jobs of ``audio_s`` seconds in all were accepted."""

    @abstractmethod
    async def finished(self, job: Job) -> None:
        """Take off what :meth:`added` counted for the job: ``job.admitted_s``, never its
        (decoded) duration, which may differ from the duration stated at intake. A count
        never goes below zero."""

    @abstractmethod
    async def _replace(self, backlogs: dict[Priority, Backlog]) -> None:
        """Every class's counts, replaced at once."""

    async def reset(self, jobs: Iterable[Job]) -> None:
        """Start from the unfinished jobs in the store."""
        await self._replace(tally(jobs))

    async def admit(self, priority: Priority, audio_s: float, count: int = 1) -> None:
        """Raise :class:`QueueFull` if ``count`` more jobs of ``audio_s`` seconds in all would
        not fit."""
        backlog = await self.backlog(priority)
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
        raise QueueFull(message, retry_after=retry)

    async def measured_throughput(self) -> float | None:
        """This node's scheduler's, or every live worker node's when this node runs none."""
        local = self.throughput()
        if local is None:
            return await self._registry.throughput()
        return local

    async def view(self) -> dict[str, dict[str, float]]:
        backlogs = {p: await self.backlog(p) for p in Priority}
        return {
            p.name.lower(): {"jobs": b.jobs, "audio_s": round(b.audio_s, 1)}
            for p, b in backlogs.items()
        }

    def _limits(self, priority: Priority) -> tuple[int, float]:
        settings = self._settings
        if priority is Priority.OFFLINE:
            return settings.batch_api_max_queued_requests, math.inf
        return settings.max_queued_jobs, settings.max_queued_audio_s
