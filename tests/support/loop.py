"""The type of the unit tests' ``run`` fixture (tests/unit/conftest.py), and a scheduler run
on a manual clock for the scheduler's unit tests, with the waits they share."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from asrserve.batcher.clock import ManualClock
from asrserve.batcher.device import Device
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from tests.support.fakes import FakeEngine

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


def run_on_engine(
    config: SchedulerConfig,
    body: Callable[[Scheduler, FakeEngine, ManualClock], Awaitable[None]],
    engine: FakeEngine | None = None,
) -> FakeEngine:
    """``body`` against a running scheduler of one device on ``engine`` (a fresh fake if
    none) with a manual clock, in a loop of its own; the engine, for its record."""
    engine = engine or FakeEngine()

    async def with_engine(scheduler: Scheduler, clock: ManualClock) -> None:
        try:
            await body(scheduler, engine, clock)
        finally:
            engine.gate.set()  # a body that ends with the gate shut must not hold the device

    run_scheduler(config, [Device.of("0", engine)], with_engine)
    return engine


async def busy(engine: FakeEngine) -> None:
    """Wait until the device has picked up work (and is held by the closed gate)."""
    assert await asyncio.to_thread(engine.entered.wait, 5)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)
