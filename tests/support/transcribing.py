"""One file through a :class:`Transcriber` and the real scheduler on one device, without a
server: what a test of the job's pipeline (staged decode, windows, progress) needs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from asrserve.backends.backend import open_backend
from asrserve.batcher.device import Device
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.engine.base import Engine
from asrserve.inference.preprocess_stats import PreprocessStats
from asrserve.inference.priority_pool import PriorityPool
from asrserve.inference.transcriber import Transcriber
from asrserve.jobs.models import Job, Progress
from asrserve.settings import Settings
from asrserve.transcript import Transcript
from asrserve.vocabulary import Priority


async def _durably(what: str, operation: Any) -> Any:
    return await operation()


def transcribe_file(
    path: Path, settings: Settings, engine: Engine, events: list[Any]
) -> tuple[Transcript, list[Progress]]:
    """The file's transcript and its progress reports; each submission to the scheduler is
    added to ``events`` as ("submitted", the windows' offsets)."""
    reports: list[Progress] = []

    async def main() -> Transcript:
        backend = open_backend(settings)
        scheduler = Scheduler([Device.of("cpu:0", engine)], SchedulerConfig())
        original = scheduler.submit_chunks

        def submit(*args: Any, **kwargs: Any) -> Any:
            events.append(("submitted", [round(chunk.offset, 3) for chunk in args[3]]))
            return original(*args, **kwargs)

        scheduler.submit_chunks = submit  # type: ignore[method-assign]
        running = asyncio.create_task(scheduler.run())
        pool = PriorityPool(2)
        try:
            job = Job(id="job_1", priority=Priority.INTERACTIVE, audio_path=str(path))
            transcriber = Transcriber(settings, backend, scheduler, _durably)
            return await transcriber.transcribe(
                job, pool, lambda: None, PreprocessStats(threads=2), reports.append
            )
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            scheduler.close()
            pool.shutdown()
            await backend.aclose()

    return asyncio.run(main()), reports
