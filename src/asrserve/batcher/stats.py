"""Live scheduler counters, read by ``GET /v1/scheduler`` and exported as metrics."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BatchRecord:
    device: str
    size: int
    started: float
    finished: float
    waits: list[float]  # per item: seconds between enqueue and dispatch
    audio_seconds: float  # the windows' audio: the pass's work
    padded_frames: int = 0  # encoder input frames that were padding
    total_frames: int = 0
    resumed_seconds: float = 0.0  # of which in windows resumed past a fallback pause

    @property
    def new_seconds(self) -> float:
        """Audio decoded for the first time: what the pass took off the backlog."""
        return self.audio_seconds - self.resumed_seconds

    @property
    def compute(self) -> float:
        return self.finished - self.started


@dataclass
class SchedulerStats:
    devices: list[str]
    batches: int = 0
    items: int = 0
    dropped: int = 0
    riders: int = 0  # offline chunks that rode in an online batch
    audio_seconds: float = 0.0
    queued_items: Counter[int] = field(default_factory=Counter)
    queued_seconds: defaultdict[int, float] = field(default_factory=lambda: defaultdict(float))
    batch_sizes: Counter[int] = field(default_factory=Counter)
    busy_seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    wait_seconds_total: float = 0.0
    padded_frames: int = 0
    total_frames: int = 0
    started: float = field(default_factory=time.monotonic)

    def queued(self, priority: int, seconds: float, delta: int) -> None:
        self.queued_items[priority] += delta
        self.queued_seconds[priority] += delta * seconds

    def record(self, batch: BatchRecord) -> None:
        self.batches += 1
        self.items += batch.size
        self.audio_seconds += batch.new_seconds
        self.batch_sizes[batch.size] += 1
        self.busy_seconds[batch.device] += batch.compute
        self.wait_seconds_total += sum(batch.waits)
        self.padded_frames += batch.padded_frames
        self.total_frames += batch.total_frames

    def throughput(self) -> float | None:
        """Audio seconds per second with every device busy, as measured so far."""
        busy = sum(self.busy_seconds.values()) / max(len(self.devices), 1)
        return self.audio_seconds / busy if busy > 0 else None

    def device_cost(self) -> float | None:
        """Device seconds per audio second, as measured so far: what admission's limits in
        device seconds count queued audio at."""
        busy = sum(self.busy_seconds.values())
        return busy / self.audio_seconds if self.audio_seconds > 0 else None

    def padding_waste(self) -> float:
        return self.padded_frames / self.total_frames if self.total_frames else 0.0

    def busy_fraction(self) -> dict[str, float]:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        return {d: min(self.busy_seconds[d] / elapsed, 1.0) for d in self.devices}

    def snapshot(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "items": self.items,
            "dropped": self.dropped,
            "offline_riders": self.riders,
            "mean_batch_size": self.items / self.batches if self.batches else 0.0,
            "mean_queue_wait_s": self.wait_seconds_total / self.items if self.items else 0.0,
            "audio_seconds": round(self.audio_seconds, 3),
            "device_s_per_audio_s": _rounded(self.device_cost()),
            "batch_sizes": {str(k): v for k, v in sorted(self.batch_sizes.items())},
            "queued_items": {str(k): v for k, v in sorted(self.queued_items.items())},
            "queued_audio_seconds": {
                str(k): round(max(v, 0.0), 3) for k, v in sorted(self.queued_seconds.items())
            },
            "padding_waste": round(self.padding_waste(), 4),
            "padded_frames": self.padded_frames,
            "total_frames": self.total_frames,
            "device_busy_seconds": {d: round(self.busy_seconds[d], 3) for d in self.devices},
            "device_busy_fraction": {d: round(f, 4) for d, f in self.busy_fraction().items()},
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
