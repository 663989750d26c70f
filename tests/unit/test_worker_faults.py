"""A chunk that makes the engine raise fails only its own job; its batch neighbours succeed.

The real worker, scheduler, SQLite store and queue, and real speech clips, with the fake
engine standing in for the model so that the failure is deterministic.
"""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from asrserve.backends import open_backend
from asrserve.batching.scheduler import Device, Scheduler, SchedulerConfig
from asrserve.corpus import Clip
from asrserve.jobs.models import Job, JobStatus, Priority
from asrserve.settings import BatchPolicy, Settings
from asrserve.worker import Lane, Worker
from tests.fakes import FakeEngine


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
        config = SchedulerConfig(BatchPolicy.WINDOW, max_batch_size=len(jobs), max_wait=60.0)
        scheduler = Scheduler([Device("cpu:0", engine)], config)
        pool = ThreadPoolExecutor(2)
        lanes = [Lane((Priority.INTERACTIVE, Priority.ASYNC), 8, pool)]
        worker = Worker(settings, backend, scheduler, engine, lanes, _nothing)
        tasks = [asyncio.create_task(scheduler.run()), asyncio.create_task(worker.run())]
        with contextlib.ExitStack() as stack:
            waits = [stack.enter_context(events.subscribe(job.id)) for job in jobs]
            for job in jobs:
                await store.create(job)
                await queue.put(job.id, job.priority)
            await asyncio.wait_for(asyncio.gather(*(w.wait() for w in waits)), 60)
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
