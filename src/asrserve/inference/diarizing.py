"""One job's speakers, through the scheduler: the file read and its speech found in the
job's preprocessing lane; its overlapped speech found by the segmentation model, 10 s at a
time, and a voice embedding of each clip of one voice, both run on the node's devices
(batched with other jobs' work of the same kind, at the job's priority and deadline); one
clustering over the whole file, in short steps on the job's lane; the turns joined to the
transcript's words.

Runs beside the job's transcription (the two share nothing until the join), so a diarized
answer takes about as long as the longer of the two, not their sum. The file's chunks and
clips go to the devices :data:`CHUNKS` and :data:`GROUP` at a time, the next group made
while one is on a device, and each group of embeddings is clustered as it comes back
(``speakers/cluster.py``: memory that grows with the file, steps that leave the lane's
threads to other jobs between them): a diarization holds its file's samples spilled to
disk past a few minutes (``audio/pcm.py``), its embeddings (768 bytes a clip) and at most
two groups of inputs in memory, whatever the file's length. Known speakers' references
are decoded first (intake has checked that each is audio of 2-10 s with speech; a length
its container does not state is checked here), their clips embedded with the file's, and
each clustered speaker matched to them (``speakers/naming.py``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from asrserve.audio.decode import decode, stream
from asrserve.audio.errors import AudioError
from asrserve.audio.pcm import Pcm, Samples, count
from asrserve.batcher.scheduler import Scheduler
from asrserve.errors import InvalidRequest
from asrserve.inference.preprocess_stats import JobPool
from asrserve.jobs.models import Job
from asrserve.known_speakers import REFERENCE_S, REFERENCES, check_length, not_audio
from asrserve.speakers.cluster import Clustering
from asrserve.speakers.diarize import Listening, features, regions
from asrserve.speakers.fbank import SAMPLE_RATE
from asrserve.speakers.naming import name_speakers
from asrserve.speakers.overlap import chunk, chunk_starts, overlaps, with_overlaps, without
from asrserve.speakers.turns import Span, Turn, clips, turns
from asrserve.vocabulary import Diarization, KnownSpeaker

Floats = npt.NDArray[np.float32]
GROUP = 256  # clips a group: their filterbanks (1.5 s, 47 KB each) are 12 MB
CHUNKS = 16  # segmentation chunks a group: 10 s as floats, 640 KB each


def _listen(path: Path, max_seconds: float, spool: Path | None) -> tuple[Pcm, list[Span]]:
    listening = Listening(spool)
    for block in stream(path, max_seconds):
        listening.feed(block)
    return listening.finish()


@dataclass(frozen=True)
class Audio:
    """A diarized job's files, local: its audio, and each known speaker's reference."""

    path: Path
    references: Sequence[Path]
    spool: Path | None = None  # where its decoded samples spill (none: the system's temp)


def _reference(known: KnownSpeaker, path: Path) -> list[Floats]:
    """The filterbanks of a reference's clips of speech; :class:`InvalidRequest` naming
    ``known_speaker_references[]`` if it is not audio of 2-10 s with speech in it (intake
    probed it and found speech in it; a length its container does not state is known only
    here)."""
    try:
        samples = decode(path, REFERENCE_S[1] + 0.5)
    except AudioError as exc:
        raise not_audio(known.name, exc.message) from None
    check_length(known.name, len(samples) / SAMPLE_RATE)
    spans = clips(regions(samples))
    if not spans:
        raise InvalidRequest(f"the reference of {known.name!r} holds no speech", param=REFERENCES)
    return features(samples, spans)


T = TypeVar("T")
Submit = Callable[[list[T]], list["asyncio.Future[np.ndarray]"]]


async def _pipelined(
    groups: Sequence[Callable[[], list[T]]],
    submit: Submit[T],
    pool: JobPool,
    submitted: list[asyncio.Future[np.ndarray]],
) -> AsyncIterator[list[np.ndarray]]:
    """Each group's outputs from the devices, in order: a group's inputs are made (on the
    job's lane) and submitted while the one before is on a device."""
    ahead: list[asyncio.Future[np.ndarray]] | None = None
    for make in groups:
        futures = submit(await pool.run(make))
        submitted += futures
        if ahead is not None:
            yield list(await asyncio.gather(*ahead))
        ahead = futures
    if ahead is not None:
        yield list(await asyncio.gather(*ahead))


@dataclass
class _Heard:
    """What the devices made of a file: its overlaps, its clips, their embeddings (and the
    references' after them), the clustering fed them."""

    overlaps: list[Span]
    spans: list[Span]
    embeddings: list[np.ndarray]
    references: list[np.ndarray]
    clustering: Clustering


async def _heard(
    scheduler: Scheduler,
    job: Job,
    samples: Samples,
    speech: list[Span],
    reference_banks: list[Floats],
    pool: JobPool,
    deadline: float | None,
) -> _Heard:
    tenant = job.owner or ""
    submitted: list[asyncio.Future[np.ndarray]] = []

    def segment(chunks: list[Floats]) -> list[asyncio.Future[np.ndarray]]:
        return scheduler.submit_segment(job.id, job.priority, chunks, deadline, tenant=tenant)

    def embed(banks: list[Floats]) -> list[asyncio.Future[np.ndarray]]:
        return scheduler.submit_embed(job.id, job.priority, banks, deadline, tenant=tenant)

    try:
        starts = chunk_starts(count(samples))
        activity: list[np.ndarray] = []
        chunk_groups = [functools.partial(_chunks, samples, g) for g in _groups(starts, CHUNKS)]
        async for found in _pipelined(chunk_groups, segment, pool, submitted):
            activity += found
        both = overlaps(starts, activity)
        spans = clips(without(speech, both))
        references = list(await asyncio.gather(*embed(reference_banks)))
        clustering = Clustering()
        ours: list[np.ndarray] = []
        clip_groups = [functools.partial(features, samples, g) for g in _groups(spans, GROUP)]
        async for found in _pipelined(clip_groups, embed, pool, submitted):
            ours += found
            await pool.run(functools.partial(clustering.add, np.stack(found)))
        return _Heard(both, spans, ours, references, clustering)
    finally:
        for future in submitted:
            future.cancel()  # the job failed elsewhere: drop what is still pending


async def speaker_turns(
    scheduler: Scheduler,
    job: Job,
    diarization: Diarization,
    audio: Audio,
    pool: JobPool,
    max_seconds: float,
    deadline: float | None,
) -> tuple[list[Turn], dict[int, str]]:
    """Who spoke when in ``audio`` (the job's file, on its clock), and the known speakers'
    names of those their references match."""
    known = [
        await pool.run(functools.partial(_reference, k, path))
        for k, path in zip(diarization.known, audio.references, strict=True)
    ]
    listen = functools.partial(_listen, audio.path, max_seconds, audio.spool)
    samples, speech = await pool.run(listen)
    try:
        if not speech:
            return [], {}
        banks = [bank for reference in known for bank in reference]
        heard = await _heard(scheduler, job, samples, speech, banks, pool, deadline)
    finally:
        samples.close()
    if not heard.spans:
        return [], {}
    low, high = diarization.min_speakers, diarization.max_speakers
    labels = await pool.run(functools.partial(heard.clustering.finish, low, high))
    references, first = [], 0
    for speaker, reference in zip(diarization.known, known, strict=True):
        voice = np.stack(heard.references[first : first + len(reference)])
        references.append((speaker.name, voice))
        first += len(reference)
    found = with_overlaps(turns(heard.spans, labels.tolist()), heard.overlaps)
    return found, name_speakers(np.stack(heard.embeddings), labels, references)


def _chunks(samples: Samples, starts: list[int]) -> list[Floats]:
    return [chunk(samples, start) for start in starts]


def _groups(items: Sequence[T], size: int) -> list[list[T]]:
    return [list(items[first : first + size]) for first in range(0, len(items), size)]
