"""``none``: whole files, one at a time, through the engine's plain path: the naive
baseline the batching policies are measured against."""

from __future__ import annotations

from collections.abc import Sequence

from asrserve.batcher.policies.base import Policy
from asrserve.batcher.policies.selection import Pending


class Unbatched(Policy):
    name = "none"
    whole_files = True

    @property
    def max_batch_size(self) -> int:
        return 1

    def ready(self, pending: Sequence[Pending], now: float) -> float | None:
        return None
