"""``window``: wait up to ``max_wait`` after the oldest pending chunk arrived, for a full
batch of its encoder window; trades that wait for fuller batches on a lightly loaded
service."""

from __future__ import annotations

from collections.abc import Sequence

from asrserve.batcher.policies.base import Policy
from asrserve.batcher.policies.selection import Pending


class Window(Policy):
    name = "window"
    uses_max_wait = True

    def ready(self, pending: Sequence[Pending], now: float) -> float | None:
        head = min(pending, key=lambda item: item.seq)
        same = sum(1 for item in pending if item.key == head.key)
        deadline = head.enqueued_at + self.config.max_wait
        if same >= self.max_batch_size or now >= deadline:
            return None
        return deadline
