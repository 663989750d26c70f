"""One job's speakers, through the scheduler: the file read and its speech found in the
job's preprocessing lane, a voice embedding of each clip run on the node's devices (batched
with other jobs' clips of the same length, at the job's priority and deadline), one
clustering over the whole file, the turns joined to the transcript's words.

Runs beside the job's transcription (the two share nothing until the join), so a diarized
answer takes about as long as the longer of the two, not their sum.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

import numpy as np
import numpy.typing as npt

from asrserve.audio.decode import stream
from asrserve.batcher.scheduler import Scheduler
from asrserve.inference.preprocess_stats import JobPool
from asrserve.jobs.models import Diarization, Job
from asrserve.speakers.cluster import cluster
from asrserve.speakers.diarize import Listening, features
from asrserve.speakers.turns import Span, Turn, turns


def _listen(path: Path, max_seconds: float) -> tuple[npt.NDArray[np.int16], list[Span]]:
    listening = Listening()
    for block in stream(path, max_seconds):
        listening.feed(block)
    return listening.finish()


async def speaker_turns(
    scheduler: Scheduler,
    job: Job,
    diarization: Diarization,
    audio: Path,
    pool: JobPool,
    max_seconds: float,
    deadline: float | None,
) -> list[Turn]:
    """Who spoke when in ``audio`` (the job's file, on its clock)."""
    samples, spans = await pool.run(functools.partial(_listen, audio, max_seconds))
    if not spans:
        return []
    banks = await pool.run(functools.partial(features, samples, spans))
    del samples
    futures = scheduler.submit_embed(job.id, job.priority, banks, deadline)
    try:
        embeddings = np.stack(await asyncio.gather(*futures))
    finally:
        for future in futures:
            future.cancel()  # the job failed elsewhere: drop what is still pending
    low, high = diarization.min_speakers, diarization.max_speakers
    labels = await pool.run(functools.partial(cluster, embeddings, low, high))
    return turns(spans, labels.tolist())
