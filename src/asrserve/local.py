"""Transcribing files in this process, no server: ``asrserve transcribe`` and offline bench."""

from __future__ import annotations

from pathlib import Path

from asrserve.audio.chunk import assemble
from asrserve.audio.features import PreparedAudio, prepare
from asrserve.engine.base import Engine, RawSegment
from asrserve.jobs.models import TranscriptionOptions
from asrserve.transcript import Transcript


def transcribe_prepared(
    engine: Engine, prepared: PreparedAudio, options: TranscriptionOptions, *, batch_size: int
) -> Transcript:
    per_chunk: list[list[RawSegment]] = []
    for start in range(0, len(prepared.chunks), batch_size):
        per_chunk.extend(
            engine.transcribe_batch(prepared.chunks[start : start + batch_size], options)
        )
    return assemble(
        per_chunk,
        prepared.layout.speech,
        prepared.duration,
        options,
        multilingual=engine.multilingual,
    )


def transcribe_file(
    engine: Engine,
    path: Path,
    options: TranscriptionOptions,
    *,
    max_seconds: float,
    vad: bool = True,
    batch_size: int = 16,
    windows: tuple[float, ...] = (30.0,),
) -> Transcript:
    prepared = prepare(path, engine, max_seconds=max_seconds, vad=vad, windows=windows)
    return transcribe_prepared(engine, prepared, options, batch_size=batch_size)
