"""Per-key request rate in Redis: the same token bucket as the embedded limiter, one hash
per key, updated atomically by a script on Redis's clock (so every API node shares it)."""

from __future__ import annotations

import redis.asyncio as aioredis

from asrserve.auth.limits import RateLimiter

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
        super().__init__()
        self._prefix = f"{prefix}:rate:"
        self._take = client.register_script(TAKE)

    async def take(self, key: str, per_minute: int) -> tuple[float, int]:
        wait, left = await self._take(keys=[self._prefix + key], args=[per_minute])
        return float(wait), int(left)
