"""Transcribing files in this process, no server: ``asrserve transcribe`` and offline bench."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from asrserve.audio.chunk import assemble
from asrserve.audio.features import PreparedAudio, prepare
from asrserve.engine.base import CHUNK_SECONDS, FRAMES_PER_SECOND, Engine, RawSegment
from asrserve.transcript import Transcript
from asrserve.vocabulary import TranscriptionOptions

FULL_WINDOW_FRAMES = int(CHUNK_SECONDS * FRAMES_PER_SECOND)


def transcribe_prepared(
    engine: Engine,
    prepared: PreparedAudio,
    options: TranscriptionOptions,
    *,
    batch_size: int,
    progress: Callable[[float, float], None] = lambda done, total: None,
) -> Transcript:
    """The file's transcript, its windows run ``batch_size`` at a time; ``progress`` is
    told the seconds of speech done and in all after each batch."""
    detected = _detect(engine, prepared, options)
    if detected is not None:
        options = options.model_copy(update={"language": detected[0], "languages": ()})
    per_chunk: list[list[RawSegment]] = []
    total = sum(chunk.duration for chunk in prepared.chunks)
    done = 0.0
    for start in range(0, len(prepared.chunks), batch_size):
        batch = prepared.chunks[start : start + batch_size]
        per_chunk.extend(engine.transcribe_batch(batch, options))
        done += sum(chunk.duration for chunk in batch)
        progress(done, total)
    transcript = assemble(
        per_chunk,
        prepared.layout.speech,
        prepared.duration,
        options,
        multilingual=engine.multilingual,
    )
    if detected is None:
        return transcript
    return transcript.model_copy(update={"language_probability": detected[1]})


def _detect(
    engine: Engine, prepared: PreparedAudio, options: TranscriptionOptions
) -> tuple[str, float] | None:
    """The file's language, as the served path decides it: once, from the first window of
    speech on a full 30 s encoder window, among ``options.languages`` if it names some
    (None: given, English-only, or no speech)."""
    if not engine.multilingual or options.language is not None or not prepared.chunks:
        return None
    features = prepared.chunks[0].features
    window = np.zeros((features.shape[0], FULL_WINDOW_FRAMES), dtype=features.dtype)
    window[:, : features.shape[1]] = features[:, :FULL_WINDOW_FRAMES]
    return engine.detect_language([window], options.languages)[0]


def transcribe_file(
    engine: Engine,
    path: Path,
    options: TranscriptionOptions,
    *,
    max_seconds: float,
    vad: bool = True,
    batch_size: int = 16,
    windows: tuple[float, ...] = (30.0,),
    first_window_s: float = 30.0,
    progress: Callable[[float, float], None] = lambda done, total: None,
) -> Transcript:
    prepared = prepare(
        path,
        engine,
        max_seconds=max_seconds,
        vad=vad,
        windows=windows,
        first_window_s=first_window_s,
    )
    return transcribe_prepared(engine, prepared, options, batch_size=batch_size, progress=progress)
