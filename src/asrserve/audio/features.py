"""From a stored upload to model-ready chunks: decode, VAD-chunk, log-mel. Runs in a pool."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrserve.audio.chunk import AudioPlan, plan
from asrserve.audio.decode import decode
from asrserve.engine.base import CHUNK_SECONDS, FRAMES_PER_SECOND, SAMPLING_RATE, ChunkInput, Engine


@dataclass(frozen=True)
class PreparedAudio:
    audio: np.ndarray
    plan: AudioPlan
    chunks: list[ChunkInput]

    @property
    def duration(self) -> float:
        return self.plan.duration


FULL_WINDOW_S = CHUNK_SECONDS
# Whisper needs a little room after the last word to close the segment with a timestamp.
WINDOW_MARGIN_S = 0.5


def window_frames(duration: float, windows: Sequence[float]) -> int:
    """Encoder frames for a chunk: the smallest window (s) that holds it with a margin."""
    for window in sorted(windows):
        if duration <= window - WINDOW_MARGIN_S:
            return round(window * FRAMES_PER_SECOND)
    return round(FULL_WINDOW_S * FRAMES_PER_SECOND)


def prepare(
    path: Path,
    engine: Engine,
    *,
    max_seconds: float,
    vad: bool,
    whole: bool = False,
    windows: tuple[float, ...] = (FULL_WINDOW_S,),
) -> PreparedAudio:
    """Blocking; ``whole`` skips chunking for the plain (unbatched) path. ``windows`` are
    the encoder window lengths (s) a chunk may be padded to (just 30 s: Whisper's own)."""
    audio = decode(path, max_seconds)
    if whole:
        duration = audio.shape[0] / SAMPLING_RATE
        return PreparedAudio(audio, AudioPlan(chunks=[], speech=[], duration=duration), [])
    audio_plan = plan(audio, vad=vad)
    chunks = [
        ChunkInput(
            features=engine.features(c.audio, window_frames(c.duration, windows)),
            offset=c.offset,
            duration=c.duration,
        )
        for c in audio_plan.chunks
    ]
    return PreparedAudio(audio, audio_plan, chunks)
