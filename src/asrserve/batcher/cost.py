"""The cost of a batch on a device: how long one forward pass over ``n`` chunks holding
``s`` seconds of audio takes, fitted by non-negative least squares on measured batches.

    latency(n, s) = a·n + b·s + e·(s / n) + c          (seconds)

``a`` is a per-chunk cost, ``b`` the cost of each second of audio in the batch (the work
that batching shares out: encoder frames, the batched part of decoding), ``e`` the cost per
second of the *mean chunk* (beam-search steps follow the length of a transcript, and a
batch takes as many steps as its chunks need, whatever ``n``), ``c`` a fixed cost per
call. All four are kept ≥ 0, so the model never predicts a batch getting cheaper as it
grows. The scheduler fits it on its own recent batches to decide whether an idle device
should wait for a fuller batch (``policies/fill.py``); ``asrserve tune`` fits it on a
recording, with the ``none`` policy's whole-file cost and the per-request overhead.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

MIN_ROWS = 3  # fewer batches than this cannot pin the coefficients down
KEEP_BATCHES = 256  # the scheduler's own fit: its most recent batches...
REFIT_EVERY = 16  # ...refitted this often...
MIN_FIT = 8  # ...once it has this many


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

    def batch(self, size: float, audio_seconds: float) -> float:
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


def fit_batch_cost(
    sizes: ArrayLike, audio: ArrayLike, compute: ArrayLike
) -> tuple[float, float, float, float]:
    """``(a, b, e, c)`` of the batch latency, from measured batches."""
    size = np.asarray(sizes, dtype=float)
    seconds = np.asarray(audio, dtype=float)
    design = np.column_stack([size, seconds, seconds / size, np.ones_like(size)])
    a, b, e, c = (float(x) for x in nnls(design, np.asarray(compute, dtype=float)))
    return a, b, e, c


class MeasuredCost:
    """The batch cost fitted on a device pool's own recent batches, refitted every
    ``REFIT_EVERY`` batches once they span more than one batch size. Until then a batch
    costs its audio at the mean rate measured so far (the CPU's case: a batch costs about
    the sum of its chunks, so nothing waits to fill one), and nothing before any batch ran.
    """

    def __init__(self, keep: int = KEEP_BATCHES) -> None:
        self._rows: deque[tuple[float, float, float]] = deque(maxlen=keep)
        self._since_fit = 0
        self._per_audio_second = 0.0  # the mean rate, until a model is fitted
        self.model: LatencyModel | None = None

    def observe(self, size: int, audio_seconds: float, compute: float) -> None:
        self._rows.append((float(size), audio_seconds, compute))
        self._since_fit += 1
        audio = sum(row[1] for row in self._rows)
        self._per_audio_second = sum(row[2] for row in self._rows) / audio if audio > 0 else 0.0
        sizes = {row[0] for row in self._rows}
        if self._since_fit >= REFIT_EVERY and len(sizes) > 1 and len(self._rows) >= MIN_FIT:
            a, b, e, c = fit_batch_cost(*zip(*self._rows, strict=True))
            self.model = LatencyModel(a, b, c, b + e, a + c, e, batches=len(self._rows))
            self._since_fit = 0

    def batch(self, size: float, audio_seconds: float) -> float:
        if self.model is not None:
            return self.model.batch(size, audio_seconds)
        return self._per_audio_second * audio_seconds
