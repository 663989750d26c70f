"""Per-key request rate: a token bucket per key, refilled continuously (monotonic clock)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    async def take(self, key: str, per_minute: int) -> tuple[float, int]:
        """Spend one request of ``key``'s budget: (seconds to wait before retrying, 0 when
        allowed; requests left). A bucket holds a minute's worth and refills evenly."""
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(per_minute), now)
        rate = per_minute / 60.0
        bucket.tokens = min(float(per_minute), bucket.tokens + (now - bucket.updated) * rate)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0, int(bucket.tokens)
        return (1.0 - bucket.tokens) / rate, 0
