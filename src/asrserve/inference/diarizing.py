"""One job's speakers, through the scheduler: the file read and its speech found in the
job's preprocessing lane, a voice embedding of each clip run on the node's devices (batched
with other jobs' clips of the same length, at the job's priority and deadline), one
clustering over the whole file, the turns joined to the transcript's words.

Runs beside the job's transcription (the two share nothing until the join), so a diarized
answer takes about as long as the longer of the two, not their sum. The file's clips are
embedded :data:`GROUP` at a time, the next group's filterbanks made while one is on the
device: a diarization holds its file's samples (2 bytes each) and at most two groups'
filterbanks, whatever the file's length. Known speakers' references are decoded first (one
that is not audio of 2–10 s with speech fails the job with a 400 naming
``known_speaker_references[]``; intake has probed them), their clips embedded with the
file's, and each clustered speaker matched to them (``speakers/naming.py``).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from asrserve.audio.decode import decode, stream
from asrserve.audio.errors import AudioError
from asrserve.batcher.scheduler import Scheduler
from asrserve.errors import InvalidRequest
from asrserve.inference.preprocess_stats import JobPool
from asrserve.jobs.models import Job
from asrserve.known_speakers import REFERENCE_S, REFERENCES, check_length, not_audio
from asrserve.speakers.cluster import cluster
from asrserve.speakers.diarize import Listening, features, regions
from asrserve.speakers.fbank import SAMPLE_RATE
from asrserve.speakers.naming import name_speakers
from asrserve.speakers.turns import Span, Turn, clips, turns
from asrserve.vocabulary import Diarization, KnownSpeaker

Floats = npt.NDArray[np.float32]
GROUP = 256  # clips a group: their filterbanks (1.5 s, 47 KB each) are 12 MB


def _listen(path: Path, max_seconds: float) -> tuple[npt.NDArray[np.int16], list[Span]]:
    listening = Listening()
    for block in stream(path, max_seconds):
        listening.feed(block)
    return listening.finish()


def _reference(known: KnownSpeaker, folder: Path) -> list[Floats]:
    """The filterbanks of a reference's clips of speech; :class:`InvalidRequest` naming
    ``known_speaker_references[]`` if it is not audio of 2–10 s with speech in it (intake
    probed it; a length its container does not state is known only here)."""
    with tempfile.NamedTemporaryFile(dir=folder, suffix=".reference") as file:
        file.write(base64.b64decode(known.audio))
        file.flush()
        try:
            samples = decode(Path(file.name), REFERENCE_S[1] + 0.5)
        except AudioError as exc:
            raise not_audio(known.name, exc.message) from None
    check_length(known.name, len(samples) / SAMPLE_RATE)
    spans = clips(regions(samples))
    if not spans:
        raise InvalidRequest(f"the reference of {known.name!r} holds no speech", param=REFERENCES)
    return features(samples, spans)


async def speaker_turns(
    scheduler: Scheduler,
    job: Job,
    diarization: Diarization,
    audio: Path,
    pool: JobPool,
    max_seconds: float,
    deadline: float | None,
) -> tuple[list[Turn], dict[int, str]]:
    """Who spoke when in ``audio`` (the job's file, on its clock), and the known speakers'
    names of those the references match."""
    folder = audio.parent
    known = [await pool.run(functools.partial(_reference, k, folder)) for k in diarization.known]
    samples, spans = await pool.run(functools.partial(_listen, audio, max_seconds))
    if not spans:
        return [], {}
    groups = [spans[first : first + GROUP] for first in range(0, len(spans), GROUP)]
    reference_banks = [bank for reference in known for bank in reference]
    submitted: list[asyncio.Future[np.ndarray]] = []
    try:
        tenant = job.owner or ""
        ahead = scheduler.submit_embed(
            job.id, job.priority, reference_banks, deadline, tenant=tenant
        )
        submitted = list(ahead)
        found: list[np.ndarray] = []
        for group in groups:  # the next group's features are made while one is embedded
            banks = await pool.run(functools.partial(features, samples, group))
            futures = scheduler.submit_embed(job.id, job.priority, banks, deadline, tenant=tenant)
            submitted += futures
            found += await asyncio.gather(*ahead)
            ahead = futures
        found += await asyncio.gather(*ahead)
    finally:
        for future in submitted:
            future.cancel()  # the job failed elsewhere: drop what is still pending
    del samples
    embeddings = np.stack(found)  # the references' clips first
    theirs, ours = embeddings[: len(reference_banks)], embeddings[len(reference_banks) :]
    low, high = diarization.min_speakers, diarization.max_speakers
    labels = await pool.run(functools.partial(cluster, ours, low, high))
    references, first = [], 0
    for speaker, reference in zip(diarization.known, known, strict=True):
        references.append((speaker.name, theirs[first : first + len(reference)]))
        first += len(reference)
    return turns(spans, labels.tolist()), name_speakers(ours, labels, references)
