"""One Redis client per process, and the errors that mean "Redis is unreachable"."""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

# Raised while Redis is down, restarting or loading its AOF: retried by workers, 503 in the API.
REDIS_ERRORS: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError)
RETRY_AFTER_S = 5  # what the API tells clients while Redis is unreachable


def connect(url: str, *, block_s: float = 5.0) -> aioredis.Redis:
    """A pooled client. Reads may block for ``block_s`` (``XREADGROUP BLOCK``), so the socket
    timeout is longer than that. A command that meets a dead connection (Redis restarted
    since it was pooled) reconnects and is retried twice, quickly; a refused connection
    fails fast. Retried writes are safe here: every write is idempotent or a counter
    whose drift the leader corrects."""
    return aioredis.Redis.from_url(
        url,
        decode_responses=False,
        socket_connect_timeout=2.0,
        socket_timeout=block_s + 10.0,
        socket_keepalive=True,
        health_check_interval=15,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
        retry_on_error=list(REDIS_ERRORS),
    )
