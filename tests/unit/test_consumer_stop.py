"""Stopping a worker's claim loops: after ``stop_claiming`` and a cancellation, ``run``
returns only once every lane's loop has ended, even one whose cancellation was lost below
it. A loop that went on claiming after the drain started jobs on a worker that was
shutting down (seen under load in the distributed stop test); the real SQLite queue here."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from asrserve.backends.backend import open_backend
from asrserve.batcher.device import Device
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.inference.consumer import Consumer, Lane
from asrserve.inference.priority_pool import PriorityPool
from asrserve.jobs.models import Job
from asrserve.queue.base import Delivery, Queue
from asrserve.settings import Settings
from asrserve.vocabulary import Priority
from tests.support.fakes import FakeEngine


class LosesOneCancellation:
    """The real queue, except that the first claim cancelled while it blocks returns
    nothing instead of raising, as a lost cancellation does."""

    def __init__(self, queue: Queue, lanes: int) -> None:
        self._queue = queue
        self._lanes = lanes
        self.blocked = 0
        self.all_blocked = asyncio.Event()
        self.lost = False

    async def get(
        self, limits: int | Mapping[Priority, int], timeout: float, total: int | None = None
    ) -> list[Delivery]:
        self.blocked += 1
        if self.blocked == self._lanes:
            self.all_blocked.set()
        try:
            return await self._queue.get(limits, timeout, total)
        except asyncio.CancelledError:
            if self.lost:
                raise
            self.lost = True
            return []
        finally:
            self.blocked -= 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


async def _nothing(job: Job) -> None:
    return None


def test_run_ends_only_when_every_claim_loop_has(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, record_traffic=False)

    async def main() -> tuple[bool, int]:
        backend = open_backend(settings)
        queue = LosesOneCancellation(backend.queue, lanes=2)
        scheduler = Scheduler([Device.of("cpu:0", FakeEngine())], SchedulerConfig("greedy"))
        pool = PriorityPool(1)
        lanes = [
            Lane((Priority.INTERACTIVE, Priority.ASYNC), 4, pool),
            Lane((Priority.OFFLINE,), 4, pool),
        ]
        wrapped = dataclasses.replace(backend, queue=queue)  # type: ignore[arg-type]
        consumer = Consumer(settings, wrapped, scheduler, lanes, _nothing)
        run = asyncio.create_task(consumer.run())
        await queue.all_blocked.wait()  # both loops wait in a claim on the empty queue
        consumer.stop_claiming()
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        still_claiming = queue.blocked
        pool.shutdown()
        await backend.aclose()
        return queue.lost, still_claiming

    assert asyncio.run(main()) == (True, 0)
