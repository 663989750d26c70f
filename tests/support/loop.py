"""The type of the unit tests' ``run`` fixture (tests/unit/conftest.py), and a scheduler run
on a manual clock for the scheduler's unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from asrserve.batcher.clock import ManualClock
from asrserve.batcher.device import Device
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig

T = TypeVar("T")


class Run(Protocol):
    """The ``run`` fixture: runs a coroutine on the test's one event loop."""

    def __call__(self, coro: Awaitable[T], /) -> T: ...


Body = Callable[[Scheduler, ManualClock], Awaitable[None]]


def run_scheduler(config: SchedulerConfig, devices: list[Device], body: Body) -> None:
    """``body`` against a running scheduler of ``devices`` on a manual clock, in a loop of
    its own; the scheduler closed after it."""

    async def main() -> None:
        clock = ManualClock()
        scheduler = Scheduler(devices, config, clock=clock)
        loops = asyncio.create_task(scheduler.run())
        try:
            await asyncio.wait_for(body(scheduler, clock), 10)
        finally:
            loops.cancel()
            await asyncio.gather(loops, return_exceptions=True)
            scheduler.close()

    asyncio.run(main())
