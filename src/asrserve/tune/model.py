"""The device latency model of a recording: the batch cost (``batcher/cost.py``), fitted
on the recorded batches. The ``none`` policy runs whole files through the plain path, one at a time:
``latency(s) = b₁·s + c₁``, fitted on the size-1 batches of the recording (else the
batched model at n = 1). Each request also spends ``o₀ + o₁·duration`` outside the
device queue (claim, decode, VAD, features): see :func:`fit_overhead`.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from asrserve.batcher.cost import MIN_ROWS, LatencyModel, fit_batch_cost, nnls
from asrserve.batcher.curve import CostCurves
from asrserve.engine.base import FRAMES_PER_SECOND

__all__ = ["MIN_ROWS", "LatencyModel", "curves", "describe_curves", "fit", "fit_overhead"]

Row = Mapping[str, Any]


def fit(batches: Sequence[Row], arrivals: Sequence[Row] = ()) -> LatencyModel:
    """:class:`LatencyModel` from recorded batch rows (and arrivals, for the overhead)."""
    if len(batches) < MIN_ROWS:
        raise ValueError(f"need at least {MIN_ROWS} recorded batches, got {len(batches)}")
    size = np.array([float(row["size"]) for row in batches])
    audio = np.array([float(row["audio_seconds"]) for row in batches])
    compute = np.array([float(row["compute"]) for row in batches])
    a, b, e, c = fit_batch_cost(size, audio, compute)
    ones = size == 1
    whole_b, whole_c, whole_n = b + e, a + c, 0
    if int(ones.sum()) >= MIN_ROWS and float(np.ptp(audio[ones])) > 0:
        single = np.column_stack([audio[ones], np.ones(int(ones.sum()))])
        whole_b, whole_c = (float(x) for x in nnls(single, compute[ones]))
        whole_n = int(ones.sum())
    o0, o1 = fit_overhead(arrivals, batches)
    return LatencyModel(a, b, c, whole_b, whole_c, e, o0, o1, len(batches), whole_n)


def fit_overhead(arrivals: Sequence[Row], batches: Sequence[Row]) -> tuple[float, float]:
    """``(o₀, o₁)``: seconds from a job's arrival to its chunk entering the scheduler, as
    ``o₀ + o₁ × duration``. Fitted on the single-chunk batches: such a batch's audio is
    its job's duration (a clip of up to 30 s is one chunk), so its enqueue time (``started
    - wait``, the scheduler's monotonic clock, which arrivals record as ``mono``) is paired
    with the latest arrival before it of that duration. (0, 0) without enough pairs."""
    marks = sorted((float(r["mono"]), float(r["duration"])) for r in arrivals if "mono" in r)
    times = [mark for mark, _ in marks]
    pairs: list[tuple[float, float]] = []
    for row in batches:
        if row.get("size") != 1 or not row.get("waits"):
            continue
        enqueued = float(row["started"]) - float(row["waits"][0])
        index = bisect.bisect_right(times, enqueued) - 1
        while index >= 0 and abs(marks[index][1] - float(row["audio_seconds"])) > 0.05:
            index -= 1
        if index >= 0 and enqueued - times[index] < 60.0:
            pairs.append((marks[index][1], enqueued - times[index]))
    if len(pairs) < MIN_ROWS:
        return 0.0, 0.0
    design = np.array([[1.0, duration] for duration, _ in pairs])
    o0, o1 = nnls(design, np.array([delay for _, delay in pairs]))
    return float(o0), float(o1)


def curves(batches: Sequence[Row], limit: int) -> CostCurves:
    """The cost curves a scheduler would have learned from the recorded batches (one model:
    a recording does not name it), by encoder window."""
    learned = CostCurves(limit)
    for row in batches:
        window = float(row.get("window_frames", 0)) / FRAMES_PER_SECOND
        key = ("", window) if window > 0 else None
        learned.observe(key, int(row["size"]), float(row["audio_seconds"]), float(row["compute"]))
    return learned


def describe_curves(learned: CostCurves) -> list[str]:
    """A line per window: the batch size that pays, and each size's audio s per device s."""
    lines = []
    for curve in learned.view():
        points = ", ".join(
            f"{size}: {point['audio_s_per_s']} ({point['batches']} batches)"
            for size, point in curve["points"].items()
        )
        lines.append(f"curve {curve['window_s']:g} s windows: pays {curve['pays']}; {points}")
    return lines
