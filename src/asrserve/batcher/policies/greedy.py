"""``greedy``: an idle device takes what is pending at once.

A lone chunk on an idle service runs without waiting; while every device is busy the
pending set grows into the next batch by itself. With several devices, one that goes
idle while others compute may wait briefly for a fuller batch when the measured batch
cost says that gives more throughput (``fill.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from asrserve.batcher.policies.base import Policy
from asrserve.batcher.policies.selection import Pending


class Greedy(Policy):
    name = "greedy"
    fills = True

    def ready(self, pending: Sequence[Pending], now: float) -> float | None:
        return None
