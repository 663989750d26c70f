"""Bounded admission: how much unfinished work each priority class may hold.

Past the limits a new request is refused with :class:`QueueFull` and a retry-after
estimated from the measured throughput: the time the class needs to drain the excess. Each
API key also has a share of each class (``ASRSERVE_MAX_QUEUED_SHARE`` of its job and audio
limits): past it, that key is refused while others still fit, so one key cannot keep every
other one out of a class. A key holding nothing in a class may always queue one request
that fits the class (a share smaller than one long file must not refuse it for good).

An online class's limit can also be set in device seconds
(``ASRSERVE_MAX_QUEUED_DEVICE_S``): the device time its queued audio will take, counted at
the measured device seconds per audio second (every pass so far, on this node or the worker
nodes). A key's share counts its own audio at its own rate of today where that is higher
(``KeyStore.spent``): a key whose audio has cost more device time per second, such as audio
that loops through the fallback, may queue less of it.

The counts are updated as jobs are accepted and finish, and rebuilt from the store when the
leader's duties start. ``local.py`` keeps them in memory (embedded); ``redis.py`` keeps them
in Redis so that every API node sees one backlog.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from asrserve.auth.keys import DeviceUsage
from asrserve.cluster.base import WorkerRegistry
from asrserve.errors import QueueFull, TooLarge
from asrserve.jobs.models import Job
from asrserve.settings.admission import AdmissionSettings
from asrserve.vocabulary import Priority

FALLBACK_THROUGHPUT = 10.0  # audio s per s, until a batch has been measured
FALLBACK_COST = 0.1  # device s per audio s, until a pass has been measured
MAX_RETRY_AFTER_S = 3600


async def unmetered(owner: str) -> DeviceUsage:
    """The usage of a key whose passes nobody meters: none."""
    return DeviceUsage()


@dataclass(frozen=True)
class Limits:
    jobs: float
    audio_s: float
    cost: float  # device s per audio s the class's (or key's) audio is counted at
    by_device: bool  # the audio limit is the device-seconds limit converted

    def share(self, part: float) -> Limits:
        return Limits(self.jobs * part, self.audio_s * part, self.cost, self.by_device)

    def bound(self) -> str:
        """The limits, as a message says them."""
        bound = [f"{self.jobs:g} jobs"]
        if math.isfinite(self.audio_s):
            bound.append(self.audio(Backlog(0, self.audio_s)))
        return ", ".join(bound)

    def audio(self, backlog: Backlog) -> str:
        """The audio ``backlog`` holds, in the units of these limits."""
        audio = f"{_seconds(backlog.audio_s)} s of audio"
        if self.by_device:
            audio += f", about {_seconds(backlog.audio_s * self.cost)} device seconds"
        return audio


def _seconds(value: float) -> str:
    """Whole seconds, or three significant digits under 100 (0.15 is not 0)."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


@dataclass
class Backlog:
    jobs: int = 0
    audio_s: float = 0.0


Held = dict[tuple[Priority, str], Backlog]


def tally(jobs: Iterable[Job]) -> tuple[dict[Priority, Backlog], Held]:
    """What ``jobs`` (the unfinished ones) count for, per class and per owning key."""
    totals = {priority: Backlog() for priority in Priority}
    held: Held = {}
    for job in jobs:
        counts = [totals[job.priority]]
        if job.owner is not None:
            counts.append(held.setdefault((job.priority, job.owner), Backlog()))
        for backlog in counts:
            backlog.jobs += 1
            backlog.audio_s += job.admitted_s
    return totals, held


class Admission(ABC):
    def __init__(self, settings: AdmissionSettings, registry: WorkerRegistry) -> None:
        self._settings = settings
        self._registry = registry
        # measured audio seconds per second at full load, and device seconds per audio
        # second; set once the scheduler runs
        self.throughput: Callable[[], float | None] = lambda: None
        self.device_cost: Callable[[], float | None] = lambda: None
        # a key's device usage of today (the key store's; set by the backend)
        self.key_usage: Callable[[str], Awaitable[DeviceUsage]] = unmetered

    @abstractmethod
    async def backlog(self, priority: Priority) -> Backlog:
        """What the class holds now."""

    @abstractmethod
    async def held(self, priority: Priority, owner: str) -> Backlog:
        """What one key holds of the class now."""

    @abstractmethod
    async def added(
        self, priority: Priority, audio_s: float, count: int = 1, owner: str | None = None
    ) -> None:
        """``count`` jobs of ``audio_s`` seconds in all were accepted for ``owner`` (None:
        auth is off, nobody's share)."""

    @abstractmethod
    async def finished(self, job: Job) -> None:
        """Take off what :meth:`added` counted for the job: ``job.admitted_s``, never its
        (decoded) duration, which may differ from the duration stated at intake. A count
        never goes below zero."""

    @abstractmethod
    async def _replace(self, backlogs: dict[Priority, Backlog], held: Held) -> None:
        """Every class's counts and every key's, replaced at once."""

    async def reset(self, jobs: Iterable[Job]) -> None:
        """Start from the unfinished jobs in the store."""
        await self._replace(*tally(jobs))

    async def admit(
        self, priority: Priority, audio_s: float, count: int = 1, owner: str | None = None
    ) -> None:
        """Raise :class:`QueueFull` if ``count`` more jobs of ``audio_s`` seconds in all would
        not fit the class, or not fit ``owner``'s share of it; :class:`TooLarge`
        (``over_queue_limit``) if they would not fit it empty (no retry could help)."""
        limits = await self._limits(priority)
        name = priority.name.lower()
        if _excess(Backlog(), limits, audio_s, count) is not None:  # no wait makes it fit
            asked = f"{count} requests" if count > 1 else limits.audio(Backlog(1, audio_s))
            raise TooLarge(
                f"the request ({asked}) is more than the {name} queue may hold at once"
                f" ({limits.bound()})",
                code="over_queue_limit",
            )
        backlog = await self.backlog(priority)
        excess = _excess(backlog, limits, audio_s, count)
        if excess is not None:
            retry = await self._retry_after(excess)
            raise QueueFull(
                f"the {name} queue is full ({backlog.jobs} jobs, {limits.audio(backlog)} "
                f"waiting); retry in about {retry} s",
                retry_after=retry,
            )
        if owner is None:
            return
        mine = await self.held(priority, owner)
        if not mine.jobs:
            return
        share = (await self._limits(priority, owner)).share(self._settings.max_queued_share)
        excess = _excess(mine, share, audio_s, count)
        if excess is not None:
            retry = await self._retry_after(excess)
            raise QueueFull(
                f"you hold {mine.jobs} jobs ({share.audio(mine)}) of the {name} queue, your "
                f"share of it; retry in about {retry} s",
                retry_after=retry,
            )

    async def _retry_after(self, excess_s: float) -> int:
        """Seconds the workers need to drain ``excess_s`` of audio, at least 1."""
        rate = await self.measured_throughput() or FALLBACK_THROUGHPUT
        return min(max(math.ceil(excess_s / rate), 1), MAX_RETRY_AFTER_S)

    async def measured_throughput(self) -> float | None:
        """This node's scheduler's, or every live worker node's when this node runs none."""
        local = self.throughput()
        if local is None:
            return await self._registry.throughput()
        return local

    async def measured_device_cost(self) -> float | None:
        """This node's scheduler's, or the live worker nodes' when this node runs none."""
        local = self.device_cost()
        if local is None:
            return await self._registry.device_cost()
        return local

    async def view(self) -> dict[str, dict[str, float]]:
        backlogs = {p: await self.backlog(p) for p in Priority}
        return {
            p.name.lower(): {"jobs": b.jobs, "audio_s": round(b.audio_s, 1)}
            for p, b in backlogs.items()
        }

    async def _limits(self, priority: Priority, owner: str | None = None) -> Limits:
        """The class's limits, or those ``owner``'s share is a part of: the audio limit is
        the lower of the audio seconds and the device seconds converted at the measured cost
        (an owner's own cost of today where it is higher)."""
        settings = self._settings
        if priority is Priority.OFFLINE:
            return Limits(settings.batch_api_max_queued_requests, math.inf, 0.0, False)
        jobs, audio = settings.max_queued_jobs, settings.max_queued_audio_s
        if not settings.max_queued_device_s:
            return Limits(jobs, audio, 0.0, False)
        cost = await self.measured_device_cost() or FALLBACK_COST
        if owner is not None:
            cost = max(cost, (await self.key_usage(owner)).rate or 0.0)
        device = settings.max_queued_device_s / cost
        return Limits(jobs, min(audio, device), cost, device < audio)


def _excess(backlog: Backlog, limits: Limits, audio_s: float, count: int) -> float | None:
    """The audio seconds by which ``count`` more jobs of ``audio_s`` seconds in all overflow
    ``backlog``'s limits (extra jobs counted at the backlog's mean length); None if they fit."""
    extra_jobs = backlog.jobs + count - limits.jobs
    extra_audio = backlog.audio_s + audio_s - limits.audio_s
    if extra_jobs <= 0 and extra_audio <= 0:
        return None
    per_job = backlog.audio_s / backlog.jobs if backlog.jobs else audio_s / count
    return max(extra_audio, extra_jobs * per_job, 0.0)
