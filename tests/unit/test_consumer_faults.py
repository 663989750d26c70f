"""A chunk that makes the engine raise fails only its own job; its batch neighbours succeed.

The real worker, scheduler, SQLite store and queue, and real speech clips, with the fake
engine standing in for the model so that the failure is deterministic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from asrserve.backends.backend import open_backend
from asrserve.batcher.device import Device
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.bench.corpus import Clip
from asrserve.inference.consumer import Consumer, Lane
from asrserve.inference.priority_pool import PriorityPool
from asrserve.inference.runtime import requeue_lost
from asrserve.jobs.models import Job, JobStatus
from asrserve.settings import Settings
from asrserve.vocabulary import Priority
from tests.support.fakes import FakeEngine


async def _nothing(job: Job) -> None:
    return None


def test_a_poison_chunk_fails_only_its_own_job(corpus: list[Clip], tmp_path: Path) -> None:
    clips = sorted((c for c in corpus if c.duration < 25), key=lambda c: c.duration)[:3]
    settings = Settings(data_dir=tmp_path, encoder_window="full", record_traffic=False)
    jobs = [
        Job(id=f"job_{i}", priority=Priority.ASYNC, audio_path=str(clip.path))
        for i, clip in enumerate(clips)
    ]

    async def main(engine: FakeEngine) -> dict[str, Job]:
        backend = open_backend(settings)
        store, queue, events = backend.store, backend.queue, backend.events
        # the window policy with a long window: the batch goes once all three are pending
        config = SchedulerConfig("window", max_batch_size=len(jobs), max_wait=60.0)
        scheduler = Scheduler([Device.of("cpu:0", engine)], config)
        pool = PriorityPool(2)
        lanes = [Lane((Priority.INTERACTIVE, Priority.ASYNC), 8, pool)]
        worker = Consumer(settings, backend, scheduler, lanes, _nothing)
        tasks = [asyncio.create_task(scheduler.run()), asyncio.create_task(worker.run())]
        finished = {job.id: asyncio.Event() for job in jobs}
        events.on_finish(lambda notice: finished[notice.job_id].set())
        for job in jobs:
            await store.create(job)
            await queue.put(job.id, job.priority)
        await asyncio.wait_for(asyncio.gather(*(f.wait() for f in finished.values())), 60)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        scheduler.close()
        pool.shutdown()
        done = {j.id: await store.get(j.id) for j in jobs}
        await backend.aclose()
        return {k: v for k, v in done.items() if v is not None}

    poison = clips[1]
    engine = FakeEngine(fail_on=poison.duration)
    done = asyncio.run(main(engine))
    failed = [job for job in done.values() if job.status is JobStatus.FAILED]
    assert len(failed) == 1 and failed[0].audio_path == str(poison.path), engine.batches
    assert failed[0].error is not None and failed[0].error.status == 500
    assert all(job.status is JobStatus.SUCCEEDED for job in done.values() if job is not failed[0])
    # one batch of three, then each chunk alone: the poison one is retried once, no more
    assert len(engine.batches[0]) == 3
    assert sorted(len(batch) for batch in engine.batches[1:]) == [1, 1, 1]


def test_a_lane_with_ahead_claims_only_what_keeps_the_device_busy(
    corpus: list[Clip], tmp_path: Path
) -> None:
    """Distributed lanes leave the rest of the backlog in the shared queue for other nodes."""
    clip = min(corpus, key=lambda c: c.duration)
    settings = Settings(data_dir=tmp_path, encoder_window="full", record_traffic=False)

    async def until(condition: Callable[[], Awaitable[bool]]) -> None:
        async with asyncio.timeout(30):
            while not await condition():  # noqa: ASYNC110 (threads change it)
                await asyncio.sleep(0.02)  # watching threads: nothing to subscribe to

    async def main(engine: FakeEngine) -> None:
        backend = open_backend(settings)
        scheduler = Scheduler([Device.of("cpu:0", engine)], SchedulerConfig(max_batch_size=2))
        pool = PriorityPool(2)
        lanes = [Lane((Priority.INTERACTIVE, Priority.ASYNC), 32, pool, ahead=2)]
        worker = Consumer(settings, backend, scheduler, lanes, _nothing)
        tasks = [asyncio.create_task(scheduler.run()), asyncio.create_task(worker.run())]
        jobs = [Job(id=f"job_{i:02d}", audio_path=str(clip.path)) for i in range(10)]
        await backend.store.create_many(jobs)
        await backend.queue.put_many([job.id for job in jobs], Priority.ASYNC)

        async def settled() -> bool:  # one batch of 2 on the device, 2 chunks waiting
            return engine.entered.is_set() and scheduler.pending_count() == 2

        await until(settled)
        await asyncio.sleep(0.3)  # time enough to claim more, were the lane to do so
        # at most one batch of 2 on the device and 2 chunks waiting: the rest is still queued
        assert worker.in_flight <= 4 and scheduler.pending_count() == 2
        assert (await backend.queue.depth())[Priority.ASYNC] == 10 - worker.in_flight
        engine.gate.set()

        async def all_done() -> bool:
            found = [await backend.store.get(job.id) for job in jobs]
            return all(job is not None and job.status is JobStatus.SUCCEEDED for job in found)

        await until(all_done)
        assert max(len(batch) for batch in engine.batches) <= 2
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        scheduler.close()
        pool.shutdown()
        await backend.aclose()

    engine = FakeEngine()
    engine.gate.clear()
    asyncio.run(main(engine))


def test_a_job_whose_enqueue_was_lost_is_queued_again(tmp_path: Path) -> None:
    async def main() -> None:
        backend = open_backend(Settings(data_dir=tmp_path, record_traffic=False))
        lost, queued = Job(id="job_lost"), Job(id="job_queued", priority=Priority.INTERACTIVE)
        await backend.store.create_many([lost, queued])
        await backend.queue.put(queued.id, queued.priority)  # the other one's put never ran
        assert await requeue_lost(backend) == 2
        claimed = await backend.queue.get(10, 0)
        assert [d.job_id for d in claimed] == ["job_queued", "job_lost"]  # each once
        assert await requeue_lost(backend) == 2 and await backend.queue.get(10, 0) == []
        await backend.aclose()

    asyncio.run(main())
