"""What the scheduler keeps pending and hands a device: one work item per chunk (or, for
policy ``none``, per whole file), with its batch key and its encoder window."""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from asrserve.engine.base import CHUNK_SECONDS, FRAMES_PER_SECOND, SAMPLING_RATE, ChunkInput
from asrserve.vocabulary import Task, TranscriptionOptions

WINDOW_FRAMES = int(CHUNK_SECONDS * FRAMES_PER_SECOND)
SPEAKER_TASKS = (Task.EMBED, Task.SEGMENT)  # diarization's work: no Whisper


def as_frames(samples: np.ndarray) -> np.ndarray:
    """16 kHz samples as a work item's features: one column per 10 ms frame (its window and
    cost curve then count frames, as a Whisper window's do)."""
    per_frame = SAMPLING_RATE // FRAMES_PER_SECOND
    out: np.ndarray = samples[: len(samples) // per_frame * per_frame].reshape(-1, per_frame).T
    return out


def samples_of(features: np.ndarray) -> np.ndarray:
    """The samples :func:`as_frames` took."""
    out: np.ndarray = features.T.reshape(-1)
    return out


@dataclass(eq=False)
class WorkItem:
    """One unit for a device: a ≤30 s chunk, or (policy ``none``) a whole file."""

    job_id: str
    priority: int
    options: TranscriptionOptions
    seq: int
    enqueued_at: float
    future: asyncio.Future[Any]
    chunk: ChunkInput | None = None
    audio: np.ndarray | None = None
    deadline: float | None = None
    model: str = ""  # the id of the model it runs on (its options may name none: the default)
    tenant: str = ""  # who it is for (an API key's id; "": no key): its share of devices

    @property
    def key(self) -> tuple[TranscriptionOptions, int]:
        """Only equal keys share a batch: the same model and decoding options (task and
        language among them) and the same encoder window (its length bucket), so a batch is
        padded to its bucket, never beyond."""
        return self.options, self.window

    @property
    def cost_key(self) -> tuple[str, float] | None:
        """Its device cost curve (``curve.py``): its model and encoder window (s); None for
        a language detection or a whole file, whose batches keep no curve."""
        if self.chunk is None or self.options.task is Task.DETECT:
            return None
        return self.model, self.window / FRAMES_PER_SECOND  # speaker clips: their frames

    @property
    def frames(self) -> tuple[int, int]:
        """(encoder input frames, of which real audio): the rest is padding."""
        real = round(self.duration * FRAMES_PER_SECOND)
        if self.chunk is not None:
            return self.chunk.features.shape[-1], min(real, self.chunk.features.shape[-1])
        windows = max(1, math.ceil(self.duration / CHUNK_SECONDS))
        return windows * WINDOW_FRAMES, real

    @property
    def window(self) -> int:
        """Encoder frames this item's features are padded to (its length bucket)."""
        return self.frames[0]

    @property
    def duration(self) -> float:
        if self.chunk is not None:
            return self.chunk.duration
        return 0.0 if self.audio is None else self.audio.shape[0] / SAMPLING_RATE

    @property
    def new_seconds(self) -> float:
        """The audio seconds a pass decodes for the first time: none for a window resumed
        between fallback passes (an earlier pass tried it), nor for diarization's passes
        over audio its job's windows decode (they are charged their device time only)."""
        if self.options.task in SPEAKER_TASKS:
            return 0.0
        return 0.0 if self.chunk is not None and self.chunk.rung > 0 else self.duration
