"""The device's cost curve: what a forward pass costs against its batch size, per model and
encoder window, so the scheduler forms batches no larger than the device pays for.

A point of a curve is a batch size and the device seconds its batches took per second of
audio they held: ``1 / cost`` is the audio the device gets through per second at that size.
On a GPU a batch of 32 costs little more than one, and the curve climbs all the way; on a
CPU replica with one thread a batch costs about the sum of its chunks, or more, and the
curve is flat or falls. The batch that pays is the smallest size within ``TOLERANCE`` of the
curve's best: a larger one gains too little throughput for the latency it adds (its first
chunk waits for its last).

A curve is seeded by a calibration when the model loads (``inference/calibration.py``) and
refined by every batch the scheduler runs. The two are not measured on like work: the
calibration fills every window with speech, while traffic's chunks are often shorter than
their window and cost more per second of audio. So a size's traffic (its compute and audio,
summed with a decay, so the point follows the device as its load changes) counts once it
has run ``MIN_BATCHES`` times, and a size that traffic has not measured is its calibrated
cost scaled by how traffic compares with the calibration at the sizes both measured: the
calibration gives the curve's shape, traffic its level.

Batches never grow past the size that pays, so once in ``EXPLORE_EVERY`` batches with
enough work waiting the scheduler tries the next size up: the curve above the cap stays
measured, and the cap follows the device. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

DECAY = 0.1  # share of a point's traffic sums that each new batch of its size replaces
TOLERANCE = 0.05  # sizes within this share of the best throughput count as paying as much
EXPLORE_EVERY = 16  # batches of a curve between two tries of the size above its cap
MIN_BATCHES = 4  # batches of a size before its traffic counts


@dataclass
class Point:
    """One batch size on one curve: its calibrated cost and its traffic's decayed sums."""

    calibrated: float | None = None  # device s per audio s, measured at start
    compute: float = 0.0
    audio: float = 0.0
    batches: int = 0

    def observe(self, audio: float, compute: float) -> None:
        keep = 1 - DECAY if self.batches else 0.0
        self.compute = keep * self.compute + compute
        self.audio = keep * self.audio + audio
        self.batches += 1

    @property
    def measured(self) -> float | None:
        """Traffic's cost at this size, once it ran often enough to count."""
        return self.compute / self.audio if self.batches >= MIN_BATCHES else None


@dataclass
class Curve:
    """The cost curve of one model on one encoder window of this node's devices."""

    points: dict[int, Point] = field(default_factory=dict)
    since_explore: int = 0

    def observe(self, size: int, audio: float, compute: float) -> None:
        self.points.setdefault(size, Point()).observe(audio, compute)
        self.since_explore += 1

    def seed(self, size: int, cost: float) -> None:
        self.points.setdefault(size, Point()).calibrated = cost

    def level(self) -> float:
        """Traffic's cost over the calibration's, at the sizes both measured (1 if none),
        each size weighted by its batches."""
        both = [
            (min(p.batches, EXPLORE_EVERY), p.measured / p.calibrated)
            for p in self.points.values()
            if p.measured is not None and p.calibrated
        ]
        weight = sum(w for w, _ in both)
        return sum(w * ratio for w, ratio in both) / weight if weight else 1.0

    def costs(self) -> dict[int, float]:
        """The cost of each size the curve knows: traffic's where it counts, else the
        calibration's at traffic's level."""
        level = self.level()
        known: dict[int, float] = {}
        for size, p in self.points.items():
            measured = p.measured
            if measured is not None:
                known[size] = measured
            elif p.calibrated is not None:
                known[size] = p.calibrated * level
        return known

    def pays(self, limit: int) -> int:
        """The batch size that pays (at most ``limit``): the smallest known size whose
        throughput is within ``TOLERANCE`` of the best known size's; ``limit`` while the
        curve knows no size."""
        known = {size: cost for size, cost in self.costs().items() if size <= limit}
        if not known or min(known.values()) <= 0:
            return limit
        best = max(1 / cost for cost in known.values())
        return min(size for size, cost in known.items() if 1 / cost >= (1 - TOLERANCE) * best)

    def above(self, size: int, limit: int) -> int | None:
        """The next size up to try: the smallest measured size above ``size``, else double."""
        sizes = sorted(s for s in self.points if size < s <= limit)
        nxt = sizes[0] if sizes else min(2 * size, limit)
        return nxt if nxt > size else None

    def view(self) -> dict[str, Any]:
        costs = self.costs()
        return {
            str(size): {
                "seconds_per_audio_s": round(costs[size], 5) if size in costs else None,
                "audio_s_per_s": round(1 / costs[size], 2) if costs.get(size) else None,
                "batches": p.batches,
                "calibrated_audio_s_per_s": round(1 / p.calibrated, 2) if p.calibrated else None,
                "from": "traffic" if p.measured is not None else "calibration",
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
        self.curves.setdefault(key, Curve()).observe(size, audio_seconds, compute)

    def seed(self, key: Hashable, size: int, cost: float) -> None:
        """A calibration's point: device seconds per audio second at ``size``."""
        self.curves.setdefault(key, Curve()).seed(size, cost)

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
