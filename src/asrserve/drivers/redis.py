"""One Redis client per process, whose commands fail with :class:`BrokerUnavailable`.

The driver's "Redis is unreachable" errors (down, restarting, loading its AOF) are translated
here, at the one client every Redis store uses, so that no caller above the stores has to know
the driver: workers retry a :class:`~asrserve.errors.StoreUnavailable`, the API answers 503.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from asrserve.errors import StoreUnavailable

# What the driver raises while Redis is unreachable; only Redis implementations catch these
# (a pub/sub connection, which does not go through the client's commands).
REDIS_ERRORS: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError)
RETRY_AFTER_S = 5  # what the API tells clients while Redis is unreachable


class BrokerUnavailable(StoreUnavailable):
    """Redis (the distributed mode's store and queue) cannot be reached."""

    default_code = "broker_unavailable"


def unreachable() -> BrokerUnavailable:
    return BrokerUnavailable(
        "the service's queue (Redis) is unreachable; nothing was accepted, retry later",
        retry_after=RETRY_AFTER_S,
    )


# Redis unreachable, as a Redis implementation may meet it: through the client's commands,
# or on a pub/sub connection of its own
UNREACHABLE: tuple[type[Exception], ...] = (BrokerUnavailable, *REDIS_ERRORS)


class _Pipeline(Pipeline):
    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        try:
            return await super().execute(raise_on_error)
        except REDIS_ERRORS as exc:
            raise unreachable() from exc

    async def immediate_execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return await super().immediate_execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except REDIS_ERRORS as exc:
            raise unreachable() from exc


class Client(aioredis.Redis):
    """The driver's client, each command and pipeline translating the driver's errors."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        except REDIS_ERRORS as exc:
            raise unreachable() from exc

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        return _Pipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


def connect(url: str, *, block_s: float = 5.0) -> aioredis.Redis:
    """A pooled client. Reads may block for ``block_s`` (``XREADGROUP BLOCK``), so the socket
    timeout is longer than that. A command that meets a dead connection (Redis restarted
    since it was pooled) reconnects and is retried twice, quickly; a refused connection
    fails fast. Retried writes are safe here: every write is idempotent or a counter
    whose drift the leader corrects."""
    return Client.from_url(
        url,
        decode_responses=False,
        socket_connect_timeout=2.0,
        socket_timeout=block_s + 10.0,
        socket_keepalive=True,
        health_check_interval=15,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
        retry_on_error=list(REDIS_ERRORS),
    )
