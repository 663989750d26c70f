"""``asrserve worker`` whose process dies (``os._exit``) on any job of a file named
``poison*``: a job that crashes its worker every time, for the dead-letter test."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from asrserve.cli.main import main
from asrserve.inference import transcriber
from asrserve.inference.preprocess_stats import PreprocessStats
from asrserve.inference.priority_pool import PriorityPool
from asrserve.inference.progress import Report, ignore
from asrserve.jobs.models import Job
from asrserve.transcript import Transcript

_transcribe = transcriber.Transcriber.transcribe


async def _crash_on_poison(
    self: transcriber.Transcriber,
    job: Job,
    preprocess: PriorityPool,
    submitted: Callable[[], None],
    stats: PreprocessStats,
    report: Report = ignore,
) -> Transcript:
    if job.filename.startswith("poison"):
        os._exit(70)
    return await _transcribe(self, job, preprocess, submitted, stats, report)


transcriber.Transcriber.transcribe = _crash_on_poison  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
