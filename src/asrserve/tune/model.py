"""The device latency model, fitted by non-negative least squares on recorded batches.

One batch of ``n`` chunks holding ``s`` seconds of audio takes

    latency(n, s) = a·n + b·s + e·(s / n) + c          (seconds)

``a`` is a per-chunk cost, ``b`` the cost of each second of audio in the batch (the work
that batching shares out: encoder frames, the batched part of decoding), ``e`` the cost per
second of the *mean chunk* (beam-search steps follow the length of a transcript, and a
batch takes as many steps as its chunks need, whatever ``n``), ``c`` a fixed cost per
call. All four are kept ≥ 0, so the model never predicts a batch getting cheaper as it
grows. The ``none`` policy runs whole files through the plain path, one at a time:
``latency(s) = b₁·s + c₁``, fitted on the size-1 batches of the recording (else the
batched model at n = 1). Each request also spends ``o₀ + o₁·duration`` outside the
device queue (claim, decode, VAD, features): see :func:`fit_overhead`.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MIN_ROWS = 3  # fewer batches than this cannot pin the coefficients down
Row = Mapping[str, Any]


@dataclass(frozen=True)
class LatencyModel:
    a: float  # s per chunk
    b: float  # s per audio second in the batch
    c: float  # s per call
    whole_b: float  # ``none``: s per audio second of a whole file
    whole_c: float  # ``none``: s per call
    e: float = 0.0  # s per second of the batch's mean chunk length
    overhead: float = 0.0  # s per request outside the device queue...
    overhead_per_s: float = 0.0  # ...plus this per audio second
    batches: int = 0  # recorded batches the fit used
    whole_batches: int = 0

    def batch(self, size: int, audio_seconds: float) -> float:
        return self.a * size + self.b * audio_seconds + self.e * audio_seconds / size + self.c

    def whole(self, audio_seconds: float) -> float:
        return self.whole_b * audio_seconds + self.whole_c

    def pre(self, duration: float) -> float:
        return self.overhead + self.overhead_per_s * duration

    def describe(self) -> str:
        ms = 1000
        return (
            f"batch latency = {self.a * ms:.1f} ms × chunks + {self.b * ms:.1f} ms × audio s"
            f" + {self.e * ms:.1f} ms × mean chunk s + {self.c * ms:.1f} ms"
            f" ({self.batches} batches); none: {self.whole_b * ms:.1f} ms × audio s"
            f" + {self.whole_c * ms:.1f} ms ({self.whole_batches} batches); overhead"
            f" {self.overhead * ms:.0f} ms + {self.overhead_per_s * ms:.1f} ms × audio s"
        )


def nnls(design: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Non-negative least squares for a handful of columns: the best of the plain
    least-squares fits over every subset of columns whose coefficients are all ≥ 0."""
    best, best_error = np.zeros(design.shape[1]), float(np.sum(target**2))
    columns = range(design.shape[1])
    for k in range(1, design.shape[1] + 1):
        for subset in itertools.combinations(columns, k):
            coef = np.linalg.lstsq(design[:, subset], target, rcond=None)[0]
            if (coef < 0).any():
                continue
            full = np.zeros(design.shape[1])
            full[list(subset)] = coef
            error = float(np.sum((design @ full - target) ** 2))
            if error < best_error:
                best, best_error = full, error
    return best


def fit(batches: Sequence[Row], arrivals: Sequence[Row] = ()) -> LatencyModel:
    """:class:`LatencyModel` from recorded batch rows (and arrivals, for the overhead)."""
    if len(batches) < MIN_ROWS:
        raise ValueError(f"need at least {MIN_ROWS} recorded batches, got {len(batches)}")
    size = np.array([float(row["size"]) for row in batches])
    audio = np.array([float(row["audio_seconds"]) for row in batches])
    compute = np.array([float(row["compute"]) for row in batches])
    design = np.column_stack([size, audio, audio / size, np.ones_like(size)])
    a, b, e, c = (float(x) for x in nnls(design, compute))
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
