"""``asrserve worker`` whose process dies (``os._exit``) on any job of a file named
``poison*``: a job that crashes its worker every time, for the dead-letter test."""

from __future__ import annotations

import os
import sys
from concurrent.futures import Executor

from asrserve import worker
from asrserve.cli import main
from asrserve.jobs.models import Job
from asrserve.transcript import Transcript

_transcribe = worker.Worker._transcribe


async def _crash_on_poison(self: worker.Worker, job: Job, preprocess: Executor) -> Transcript:
    if job.filename.startswith("poison"):
        os._exit(70)
    return await _transcribe(self, job, preprocess)


worker.Worker._transcribe = _crash_on_poison  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
