"""How much audio the preprocessing pool (decode, resample, VAD, log-mel) can feed the devices.

The devices' capacity is measured by :meth:`SchedulerStats.throughput`; this is the same
measurement for the CPU pool in front of them, so that ``GET /v1/scheduler`` can say which of
the two limits a node. Audio is counted in the unit the scheduler counts: the seconds of the
windows (or whole files) the pool handed to the scheduler, so the two capacities compare.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class PreprocessStats:
    """Per preprocessed job: its audio seconds and the seconds the pool's threads spent on it."""

    threads: int
    jobs: int = 0
    audio_seconds: float = 0.0
    busy_seconds: float = 0.0
    clock: Callable[[], float] = time.monotonic
    started: float = field(default=-1.0)

    def __post_init__(self) -> None:
        if self.started < 0:
            self.started = self.clock()

    def record(self, audio_seconds: float, busy_seconds: float) -> None:
        self.jobs += 1
        self.audio_seconds += audio_seconds
        self.busy_seconds += busy_seconds

    def capacity(self) -> float | None:
        """Audio seconds per second with every thread busy: audio per busy thread-second
        times the threads. None until some pool time was measured."""
        if self.busy_seconds <= 0:
            return None
        return self.audio_seconds / self.busy_seconds * self.threads

    def busy_fraction(self) -> float:
        """Share of the pool's thread-seconds since start spent preprocessing."""
        elapsed = max(self.clock() - self.started, 1e-9)
        return min(self.busy_seconds / (elapsed * self.threads), 1.0)

    def snapshot(self) -> dict[str, Any]:
        capacity = self.capacity()
        return {
            "threads": self.threads,
            "jobs": self.jobs,
            "audio_seconds": round(self.audio_seconds, 3),
            "busy_seconds": round(self.busy_seconds, 3),
            "capacity": None if capacity is None else round(capacity, 3),
            "busy_fraction": round(self.busy_fraction(), 4),
        }


def bound(preprocessing: float | None, devices: float | None) -> str | None:
    """Which stage limits the node: "preprocessing" when the pool can feed less audio per
    second than the devices can transcribe, else "devices"; None until both are measured."""
    if preprocessing is None or devices is None:
        return None
    return "preprocessing" if preprocessing < devices else "devices"


class JobPool:
    """One job's steps in the preprocessing pool, timed in the pool thread (so time queued
    for a thread is not counted), and the audio it handed to the scheduler. A job's steps run
    one after another (each is awaited), so two threads never write one of these at once."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self.busy_seconds = 0.0
        self.audio_seconds = 0.0

    async def run(self, step: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(self._timed, step))

    def handed_on(self, seconds: float) -> None:
        self.audio_seconds += seconds

    def _timed(self, step: Callable[[], T]) -> T:
        start = time.perf_counter()
        try:
            return step()
        finally:
            self.busy_seconds += time.perf_counter() - start
