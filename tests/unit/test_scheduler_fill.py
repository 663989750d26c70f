"""Two replicas, a manual clock and a known batch cost: an idle replica waits for a fuller
batch only while the other computes, and never past its bound."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from asrserve.batcher.clock import ManualClock
from asrserve.batcher.device import Device
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.vocabulary import Priority, TranscriptionOptions
from tests.support.fakes import FakeEngine, chunk

OPTS = TranscriptionOptions()


def primed(scheduler: Scheduler) -> None:
    """A measured cost of 1 s per call plus 10 ms per chunk: batching pays."""
    for i in range(32):
        size = 1 + i % 4
        scheduler.cost.observe(size, 5.0 * size, 1.0 + 0.01 * size)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


Body = Callable[[Scheduler, FakeEngine, FakeEngine, ManualClock], Awaitable[None]]


def two_replicas(body: Body) -> tuple[FakeEngine, FakeEngine]:
    first, second = FakeEngine(), FakeEngine()

    async def main() -> None:
        clock = ManualClock()
        devices = [Device.of("0", first), Device.of("1", second)]
        scheduler = Scheduler(devices, SchedulerConfig("greedy", max_batch_size=8), clock=clock)
        primed(scheduler)
        loops = asyncio.create_task(scheduler.run())
        try:
            await asyncio.wait_for(body(scheduler, first, second, clock), 10)
        finally:
            loops.cancel()
            first.gate.set()
            second.gate.set()
            await asyncio.gather(loops, return_exceptions=True)
            scheduler.close()

    asyncio.run(main())
    return first, second


def test_an_idle_replica_waits_for_company_while_the_other_computes() -> None:
    async def body(s: Scheduler, first: FakeEngine, second: FakeEngine, clock: ManualClock) -> None:
        first.gate.clear()
        second.gate.clear()
        futures = s.submit_chunks("a", Priority.INTERACTIVE, OPTS, [chunk(5.0)])
        await settle()
        assert s.pending_count() == 0  # one replica took it, and computes (its gate is shut)
        clock.advance(0.05)  # a second arrival 50 ms later: 20 chunks/s
        futures += s.submit_chunks("b", Priority.INTERACTIVE, OPTS, [chunk(5.0)])
        await settle()
        assert s.pending_count() == 1  # held: the other replica computes, company is due
        clock.advance(0.05)
        futures += s.submit_chunks("c", Priority.INTERACTIVE, OPTS, [chunk(5.0)])
        await settle()
        clock.advance(1.0)  # past the longest wait (a quarter of the batch's 1.02 s)
        await settle()
        assert s.pending_count() == 0
        first.gate.set()
        second.gate.set()
        await asyncio.gather(*futures)

    first, second = two_replicas(body)
    assert sorted(first.batches + second.batches) == [[5.0], [5.0, 5.0]]


def test_a_lone_chunk_on_idle_replicas_runs_at_once() -> None:
    async def body(s: Scheduler, first: FakeEngine, second: FakeEngine, clock: ManualClock) -> None:
        for name in "abc":  # a fast arrival rate, each one served before the next
            (future,) = s.submit_chunks(name, Priority.INTERACTIVE, OPTS, [chunk(5.0)])
            await future  # the clock never moves: nobody waited
            clock.advance(0.05)

    first, second = two_replicas(body)
    assert sorted(first.batches + second.batches) == [[5.0], [5.0], [5.0]]
