"""A live session's recent audio: 16 kHz samples addressed by their index since the
session's first sample, the older ones dropped as the session no longer needs them."""

from __future__ import annotations

import numpy as np


class PcmBuffer:
    def __init__(self) -> None:
        self._parts: list[np.ndarray] = []
        self.start = 0  # index of the oldest sample kept
        self.end = 0  # index after the newest

    def append(self, samples: np.ndarray) -> None:
        if samples.size:
            self._parts.append(samples)
            self.end += samples.shape[0]

    def since(self, at: int) -> np.ndarray:
        """The samples from ``at`` (or the oldest kept) to the end."""
        self._join()
        whole = self._parts[0] if self._parts else np.zeros(0, dtype=np.float32)
        return whole[max(at - self.start, 0) :]

    def drop_before(self, at: int) -> None:
        at = min(max(at, self.start), self.end)
        if at == self.start:
            return
        self._join()
        self._parts = [self._parts[0][at - self.start :].copy()] if at < self.end else []
        self.start = at

    def _join(self) -> None:
        if len(self._parts) > 1:
            self._parts = [np.concatenate(self._parts)]
