"""The device's cost curve: what a forward pass costs against its batch size, per model and
encoder window, so the scheduler forms batches no larger than the device pays for.

A point of a curve is a batch size and the device seconds its batches took per second of
audio they held (an exponential moving average, so it follows the device as its load
changes): ``1 / cost`` is the audio the device gets through per second at that size. On a
GPU a batch of 32 costs little more than one, and the curve climbs all the way; on a CPU
replica with one thread a batch costs about the sum of its chunks, or more, and the curve
is flat or falls. The batch that pays is the smallest size within ``TOLERANCE`` of the
curve's best: a larger one gains too little throughput for the latency it adds (its first
chunk waits for its last).

A curve is seeded by a calibration when the model loads (``inference/calibration.py``) and
refined by every batch the scheduler runs. Batches never grow past the size that pays, so
once in ``EXPLORE_EVERY`` batches with enough work waiting the scheduler tries the next
size up: the curve above the cap stays measured, and the cap follows the device. Pure: no
clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

ALPHA = 0.25  # weight of a new batch in a point's moving average
TOLERANCE = 0.05  # sizes within this share of the best throughput count as paying as much
EXPLORE_EVERY = 16  # batches of a curve between two tries of the size above its cap
MIN_BATCHES = 2  # a point measured fewer times than this ranks only if calibrated


@dataclass
class Point:
    """One batch size on one curve: device seconds per audio second, averaged."""

    cost: float
    batches: int = 1
    calibrated: bool = False

    def observe(self, cost: float) -> None:
        self.cost += ALPHA * (cost - self.cost)
        self.batches += 1

    @property
    def trusted(self) -> bool:
        return self.calibrated or self.batches >= MIN_BATCHES


@dataclass
class Curve:
    """The cost curve of one model on one encoder window of this node's devices."""

    points: dict[int, Point] = field(default_factory=dict)
    since_explore: int = 0

    def observe(self, size: int, cost: float, calibrated: bool = False) -> None:
        point = self.points.get(size)
        self.since_explore += not calibrated
        if point is None or calibrated:
            self.points[size] = Point(cost, 1, calibrated)
        else:
            point.observe(cost)

    def pays(self, limit: int) -> int:
        """The batch size that pays (at most ``limit``): the smallest trusted size whose
        throughput is within ``TOLERANCE`` of the best trusted size's; ``limit`` while the
        curve has no trusted point."""
        trusted = {size: p.cost for size, p in self.points.items() if p.trusted and size <= limit}
        if not trusted or min(trusted.values()) <= 0:
            return limit
        best = max(1 / cost for cost in trusted.values())
        return min(size for size, cost in trusted.items() if 1 / cost >= (1 - TOLERANCE) * best)

    def above(self, size: int, limit: int) -> int | None:
        """The next size up to try: the smallest measured size above ``size``, else double."""
        sizes = sorted(s for s in self.points if size < s <= limit)
        nxt = sizes[0] if sizes else min(2 * size, limit)
        return nxt if nxt > size else None

    def view(self) -> dict[str, Any]:
        return {
            str(size): {
                "seconds_per_audio_s": round(p.cost, 5),
                "audio_s_per_s": round(1 / p.cost, 2) if p.cost > 0 else None,
                "batches": p.batches,
                "calibrated": p.calibrated,
            }
            for size, p in sorted(self.points.items())
        }


class CostCurves:
    """Every curve of a scheduler's devices, by cost key (a model and an encoder window).

    ``largest`` is what a batching policy asks (``policies/fill.py``'s ``BatchSizes``);
    ``observe`` is told of every batch that ran.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.curves: dict[Hashable, Curve] = {}

    def observe(
        self, key: Hashable | None, size: int, audio_seconds: float, compute: float
    ) -> None:
        """A batch of ``size`` chunks holding ``audio_seconds`` took ``compute`` seconds."""
        if key is None or size < 1 or audio_seconds <= 0 or compute <= 0:
            return
        self.curves.setdefault(key, Curve()).observe(size, compute / audio_seconds)

    def seed(self, key: Hashable, size: int, cost: float) -> None:
        """A calibration's point: it replaces what the curve held at ``size``."""
        self.curves.setdefault(key, Curve()).observe(size, cost, calibrated=True)

    def largest(self, key: Hashable | None, waiting: int) -> int:
        """The largest batch to form for ``key`` with ``waiting`` chunks of it pending: the
        size that pays, or once in ``EXPLORE_EVERY`` batches (with more than that waiting)
        the next size up, to keep measuring it."""
        curve = None if key is None else self.curves.get(key)
        if curve is None:
            return self.limit
        pays = curve.pays(self.limit)
        if waiting <= pays or curve.since_explore < EXPLORE_EVERY:
            return pays
        curve.since_explore = 0
        return curve.above(pays, self.limit) or pays

    def pays(self, key: Hashable | None) -> int:
        """The batch size that pays for ``key`` (``limit`` without a curve)."""
        curve = None if key is None else self.curves.get(key)
        return self.limit if curve is None else curve.pays(self.limit)

    def view(self) -> list[dict[str, Any]]:
        """Each curve: its key's fields, the size that pays, and its points."""
        return [
            {**_fields(key), "pays": curve.pays(self.limit), "points": curve.view()}
            for key, curve in sorted(self.curves.items(), key=lambda kv: str(kv[0]))
        ]


def _fields(key: Hashable) -> dict[str, Any]:
    if isinstance(key, tuple) and len(key) == 2:
        model, window = key
        return {"model": model, "window_s": window}
    return {"key": str(key)}
