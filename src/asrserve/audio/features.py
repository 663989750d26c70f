"""From a stored upload to model-ready chunks: decode, VAD-chunk, log-mel. Runs in a pool."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrserve.audio.chunk import AudioPlan, plan
from asrserve.audio.decode import decode
from asrserve.engine.base import ChunkInput, Engine


@dataclass(frozen=True)
class PreparedAudio:
    audio: np.ndarray
    plan: AudioPlan
    chunks: list[ChunkInput]

    @property
    def duration(self) -> float:
        return self.plan.duration


def prepare(
    path: Path, engine: Engine, *, max_seconds: float, vad: bool, whole: bool = False
) -> PreparedAudio:
    """Blocking; ``whole`` skips chunking for the plain (unbatched) path."""
    audio = decode(path, max_seconds)
    if whole:
        duration = audio.shape[0] / 16_000
        return PreparedAudio(audio, AudioPlan(chunks=[], speech=[], duration=duration), [])
    audio_plan = plan(audio, vad=vad)
    chunks = [
        ChunkInput(features=engine.features(c.audio), offset=c.offset, duration=c.duration)
        for c in audio_plan.chunks
    ]
    return PreparedAudio(audio, audio_plan, chunks)
