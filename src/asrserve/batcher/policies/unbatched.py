"""``unbatched``: this service's pipeline (windows, length buckets, preprocessing pool,
layout, priorities) with batches of one window. Measured against a batching policy, it
isolates what batching itself adds; ``none`` is what a user would otherwise run."""

from __future__ import annotations

from asrserve.batcher.policies.greedy import Greedy


class Unbatched(Greedy):
    name = "unbatched"
    fills = False  # a batch of one has nothing to wait for

    @property
    def max_batch_size(self) -> int:
        return 1
