"""The simulator's chunks and pending set: ``policies.select_batch`` made incremental.

Items are kept per (encoder window, priority) group in arrival order, so the head and
a batch are found by looking at one window's items instead of sorting everything
pending. ``tests/test_tune.py`` checks it against ``select_batch`` on random inputs.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from asrserve.audio.features import window_frames
from asrserve.batcher.policies import LENGTH_BUCKET_S
from asrserve.engine.base import CHUNK_SECONDS as CHUNK_S
from asrserve.settings import Settings

DEFAULT_WINDOWS: tuple[float, ...] = Settings.model_fields["encoder_windows_s"].default

__all__ = [
    "CHUNK_S",
    "DEFAULT_WINDOWS",
    "LENGTH_BUCKET_S",
    "Item",
    "Pending",
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

    @property
    def key(self) -> int:
        return self.window

    @property
    def job_id(self) -> str:
        return str(self.job)


class Pending:
    def __init__(self) -> None:
        self._groups: dict[tuple[int, int], list[Item]] = {}  # (window, priority) → by seq
        self._seq = 0
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, job: int, priority: int, duration: float, window: int, now: float) -> Item:
        item = Item(job, priority, duration, window, self._seq, now)
        self._seq += 1
        self._groups.setdefault((window, priority), []).append(item)
        self._count += 1
        return item

    def oldest(self) -> Item:
        return min((group[0] for group in self._groups.values()), key=lambda item: item.seq)

    def window_ready(self, now: float, max_batch_size: int, max_wait_ms: float) -> float:
        """When the ``window`` policy dispatches: now if a full batch of the oldest chunk's
        window waits, else that chunk's arrival plus ``max_wait``."""
        head = self.oldest()
        same = sum(len(g) for (window, _), g in self._groups.items() if window == head.window)
        if same >= max_batch_size:
            return now
        return max(now, head.enqueued_at + max_wait_ms / 1000)

    def take(self, now: float, limit: int, max_age: float) -> list[Item]:
        """Remove and return the next batch, as ``select_batch`` would pick it."""
        head = self.oldest()
        if now - head.enqueued_at < max_age:
            # Not overdue: the lowest priority class, then its earliest chunk (which is its
            # job's first pending one, so fair rank 0).
            head = min(
                (group[0] for group in self._groups.values()),
                key=lambda item: (item.priority, item.seq),
            )
        batch = [head, *self._companions(head, limit - 1)]
        taken = {id(item) for item in batch}
        for key in {(item.window, item.priority) for item in batch}:
            rest = [item for item in self._groups[key] if id(item) not in taken]
            if rest:
                self._groups[key] = rest
            else:
                del self._groups[key]
        self._count -= len(batch)
        return batch

    def _companions(self, head: Item, room: int) -> list[Item]:
        """Up to ``room`` items of the head's window: priority, fair rank among them,
        distance of length bucket, arrival order."""
        if room <= 0:
            return []
        chosen: list[Item] = []
        head_bucket = int(head.duration // LENGTH_BUCKET_S)
        for key in sorted(k for k in self._groups if k[0] == head.window):
            ranks: dict[int, int] = {}
            ordered: list[tuple[int, int, int, Item]] = []
            for item in self._groups[key]:  # one job's items share its priority group
                rank = ranks.get(item.job, 0)
                ranks[item.job] = rank + 1
                if item is not head:
                    bucket = abs(int(item.duration // LENGTH_BUCKET_S) - head_bucket)
                    ordered.append((rank, bucket, item.seq, item))
            best = heapq.nsmallest(room - len(chosen), ordered, key=lambda t: t[:3])
            chosen.extend(entry[3] for entry in best)
            if len(chosen) >= room:
                break
        return chosen
