"""Fixtures for the backend contracts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Protocol, TypeVar

import pytest
import redis.asyncio as aioredis

from asrserve.bench.redis_process import RedisProcess
from asrserve.sqlite import Database

T = TypeVar("T")


class Run(Protocol):
    """The ``run`` fixture: runs a coroutine on the test's one event loop."""

    def __call__(self, coro: Awaitable[T], /) -> T: ...


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "test.db")
    yield db
    db.close()


@pytest.fixture
def run() -> Iterator[Callable[[Awaitable[T]], T]]:
    """Run coroutines on one event loop for the whole test (a Redis client's connections
    belong to the loop that opened them)."""
    with asyncio.Runner() as runner:
        yield runner.run


@pytest.fixture
def redis_url(redis_server: RedisProcess) -> str:
    """The session's redis-server, emptied for this test."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    client.close()
    return redis_server.url


@pytest.fixture
def redis_client(redis_url: str, run: Run) -> Iterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    run(client.aclose())
