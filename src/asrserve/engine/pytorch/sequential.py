"""Whisper's sequential decoding of a whole file on the PyTorch engine: the ``none``
baseline, as faster-whisper's ``transcribe`` is on CTranslate2.

30 s windows in order, no VAD: each decoded alone (the temperature fallback included),
conditioned on the text before it; the next window starts where this one's last segment
ended, unless that leaves less than a second (then at its end). The language, when none
is given, is detected once on the first window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from asrserve.engine.base import (
    CHUNK_SECONDS,
    FRAMES_PER_SECOND,
    SAMPLING_RATE,
    ChunkInput,
    segment_of,
)
from asrserve.engine.decoding import MIN_TAIL_S, context_tokens
from asrserve.engine.fallback import PROMPT_RESET_TEMPERATURE, Attempt, decode_all, temperatures
from asrserve.transcript import Segment, Transcript, Word
from asrserve.vocabulary import TranscriptionOptions

if TYPE_CHECKING:
    from asrserve.engine.pytorch.engine import TransformersEngine

WINDOW = int(CHUNK_SECONDS * FRAMES_PER_SECOND)


def transcribe(
    engine: TransformersEngine, audio: np.ndarray, options: TranscriptionOptions
) -> Transcript:
    mel = engine.features(audio, frames=max(1, len(audio) // (SAMPLING_RATE // FRAMES_PER_SECOND)))
    frames = mel.shape[-1]
    probability = None
    if engine.multilingual and options.language is None:
        first = np.zeros((mel.shape[0], WINDOW), dtype=np.float32)
        first[:, : min(WINDOW, frames)] = mel[:, :WINDOW]
        [(language, probability)] = engine.detect_language([first], options.languages)
        options = options.model_copy(update={"language": language, "languages": ()})
    segments: list[Segment] = []
    said = ""
    seek = 0
    while seek < frames:
        window = np.zeros((mel.shape[0], WINDOW), dtype=np.float32)
        piece = mel[:, seek : seek + WINDOW]
        window[:, : piece.shape[1]] = piece
        chunk = ChunkInput(
            window, seek / FRAMES_PER_SECOND, piece.shape[1] / FRAMES_PER_SECOND, said
        )
        [found] = decode_all(
            [chunk],
            temperatures(options.temperature, engine.config.fallback),
            lambda todo, temperature: _once(engine, todo, options, temperature),
            lambda c: None,
        )
        for raw in found:
            words = None
            if raw.words is not None:
                words = [
                    Word(word=w.word, start=w.start, end=w.end, probability=w.probability)
                    for w in raw.words
                ]
            segments.append(segment_of(raw, len(segments), raw.start, raw.end, words))
            said += raw.text
        seek = _next(seek, chunk, found[-1].end if found else None)
    return Transcript(
        language=options.language or "en",
        duration=len(audio) / SAMPLING_RATE,
        segments=segments,
        task=options.task.value,
        language_probability=probability,
    )


def _next(seek: int, chunk: ChunkInput, last_end: float | None) -> int:
    """Where the next window starts: the window's end, or its last segment's end when that
    leaves a second or more undecoded."""
    end = seek + round(chunk.duration * FRAMES_PER_SECOND)
    if last_end is None or chunk.offset + chunk.duration - last_end < MIN_TAIL_S:
        return end
    return max(seek + 1, round(last_end * FRAMES_PER_SECOND))


def _once(
    engine: TransformersEngine,
    chunks: list[ChunkInput],
    options: TranscriptionOptions,
    temperature: float,
) -> list[Attempt]:
    """One pass over each window, no continuation (the seek is the continuation)."""
    setup = engine.setup(options, temperature)
    reset = temperature > PROMPT_RESET_TEMPERATURE
    context = [[] if reset else context_tokens(setup.tokenizer.encode, c.context) for c in chunks]
    outputs = engine.forward(chunks, context, setup)
    return [Attempt(out.segments, temperature, out.truncated) for out in outputs]
