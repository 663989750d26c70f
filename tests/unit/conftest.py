"""Fixtures for the backend contracts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import redis.asyncio as aioredis

from asrserve.bench.redis_process import RedisProcess
from asrserve.drivers.sqlite import Database
from tests.support.loop import Run

T = TypeVar("T")


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "test.db")
    yield db
    db.close()


@pytest.fixture
def run() -> Iterator[Run]:
    """Run coroutines on one event loop for the whole test (a Redis client's connections
    belong to the loop that opened them)."""
    with asyncio.Runner() as runner:

        def run_on_the_loop(awaitable: Awaitable[T], /) -> T:
            return runner.run(_awaited(awaitable))

        yield run_on_the_loop


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


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
