"""The simulator's chunks: how a request is cut and padded, as the service does it.

An :class:`Item` is what the scheduler's policies (``batcher.policies``) select from, in
place of the scheduler's ``WorkItem``: the simulator runs the very same policy objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from asrserve.audio.features import window_frames
from asrserve.engine.base import CHUNK_SECONDS as CHUNK_S
from asrserve.engine.base import FRAMES_PER_SECOND
from asrserve.settings import Settings

DEFAULT_WINDOWS: tuple[float, ...] = Settings.model_fields["encoder_windows_s"].default

__all__ = [
    "CHUNK_S",
    "DEFAULT_WINDOWS",
    "Item",
    "chunk_durations",
    "window_frames",
]


def chunk_durations(duration: float) -> list[float]:
    """≤30 s pieces of a request: one for a clip of up to 30 s, else 30 s each and a tail."""
    if duration <= CHUNK_S:
        return [duration]
    full, tail = divmod(duration, CHUNK_S)
    return [CHUNK_S] * int(full) + ([tail] if tail > 1e-9 else [])


@dataclass(eq=False, slots=True)
class Item:
    job: int
    priority: int
    duration: float
    window: int  # encoder frames; the batch key (one set of decoding options)
    seq: int
    enqueued_at: float
    job_id: str = field(init=False)  # the job as the policies see it; kept: read per batch

    def __post_init__(self) -> None:
        self.job_id = str(self.job)

    @property
    def key(self) -> int:
        return self.window

    @property
    def cost_key(self) -> tuple[str, float]:  # its cost curve: one model, by window (s)
        return "", self.window / FRAMES_PER_SECOND

    @property
    def tenant(self) -> str:  # the simulation has one tenant
        return ""
