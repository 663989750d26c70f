"""When a running batch gives its device up between fallback passes.

A window that loops at temperature 0 is decoded again at each rung of the fallback ladder,
up to six passes (``engine/fallback.py``). A forward pass is never interrupted, but the
passes of one batch need not run back to back: between two of them the engine asks its
:class:`~asrserve.engine.base.Pause`. :class:`Wanted` says yes when work is waiting that
ranks before the batch's — a better priority class, or another tenant's with less recent
device time than any of the batch's tenants, which the fair queueing across keys puts
first — and keeps each unfinished window, resumable at its next rung, for the scheduler to
queue again. So a looping file of one key takes its fallback passes within that key's
share, not as one pass as long as all of them; a key within its share does not give its
passes up to a key past it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from asrserve.batcher.shares import split
from asrserve.batcher.work import WorkItem
from asrserve.engine.base import ChunkInput, Pause


@dataclass(frozen=True)
class Paused:
    """A batch's output for a window that gave the device up between fallback passes."""

    chunk: ChunkInput


class Wanted(Pause):
    """The pause of one batch, read from the device's thread: ``waiting`` gives the
    scheduler's pending work (a list the event loop replaces or appends to, copied here),
    ``usage`` a tenant's recent device seconds, ``clock`` the time. The batch's own passes
    so far count for its tenants, split by their windows' frames, as they will be charged."""

    def __init__(
        self,
        batch: Sequence[WorkItem],
        waiting: Callable[[], list[WorkItem]],
        usage: Callable[[str], float],
        clock: Callable[[], float],
    ) -> None:
        self._shares = split([item.tenant for item in batch], [item.frames[0] for item in batch])
        self._priority = min(item.priority for item in batch)
        self._waiting, self._usage, self._clock = waiting, usage, clock
        self._started = clock()
        self.kept: dict[int, ChunkInput] = {}  # batch index -> the chunk that resumes it

    def due(self) -> bool:
        ran = self._clock() - self._started
        ours = min(self._usage(t) + ran * share for t, share in self._shares.items())
        return any(
            item.priority < self._priority
            or (item.tenant not in self._shares and self._usage(item.tenant) < ours)
            for item in list(self._waiting())
            if not item.future.done()
        )

    def keep(self, index: int, chunk: ChunkInput) -> None:
        self.kept[index] = chunk

    def outputs(self, outputs: Sequence[object]) -> list[object]:
        """The batch's outputs, each kept window's as :class:`Paused`."""
        return [
            Paused(self.kept[index]) if index in self.kept else output
            for index, output in enumerate(outputs)
        ]
