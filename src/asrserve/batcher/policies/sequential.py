"""``none``: whole files, one at a time, through faster-whisper's own ``transcribe`` with
its defaults: what a user would otherwise run, the naive baseline. ``unbatched`` is the
baseline of batching itself."""

from __future__ import annotations

from collections.abc import Sequence

from asrserve.batcher.policies.base import Policy
from asrserve.batcher.policies.selection import Pending


class Sequential(Policy):
    name = "none"
    whole_files = True

    @property
    def max_batch_size(self) -> int:
        return 1

    def ready(self, pending: Sequence[Pending], now: float) -> float | None:
        return None
