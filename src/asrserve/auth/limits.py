"""Per-key request rate: a token bucket per key, holding a minute's worth and refilled
evenly. :class:`LocalRateLimiter` keeps the buckets in memory on a monotonic clock
(embedded); :class:`RedisRateLimiter` keeps one hash per key, updated atomically by a
script on Redis's clock, so that every API node shares it."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import redis.asyncio as aioredis


class RateLimiter(ABC):
    @abstractmethod
    async def take(self, key: str, per_minute: int) -> tuple[float, int]:
        """Spend one request of ``key``'s budget: (seconds to wait before retrying, 0 when
        allowed; requests left)."""


@dataclass
class _Bucket:
    tokens: float
    updated: float


class LocalRateLimiter(RateLimiter):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    async def take(self, key: str, per_minute: int) -> tuple[float, int]:
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


TAKE = """
local per_minute = tonumber(ARGV[1])
local rate = per_minute / 60
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local state = redis.call('HMGET', KEYS[1], 'tokens', 'updated')
local tokens = tonumber(state[1]) or per_minute
local updated = tonumber(state[2]) or now
tokens = math.min(per_minute, tokens + (now - updated) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'updated', tostring(now))
redis.call('EXPIRE', KEYS[1], 120)
return {tostring(wait), math.floor(tokens)}
"""


class RedisRateLimiter(RateLimiter):
    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self._prefix = f"{prefix}:rate:"
        self._take = client.register_script(TAKE)

    async def take(self, key: str, per_minute: int) -> tuple[float, int]:
        wait, left = await self._take(keys=[self._prefix + key], args=[per_minute])
        return float(wait), int(left)
