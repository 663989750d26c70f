"""The Redis Streams queue: the shared contract plus what only a distributed queue has."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from asrserve.queue.base import Delivery, Queue
from asrserve.queue.redis import RedisQueue
from asrserve.vocabulary import Priority
from tests.support.contracts import QueueContract

_names = itertools.count()
_closers: set[asyncio.Task[None]] = set()


def make(url: str, consumer: str | None = None, lease_s: float = 30.0) -> RedisQueue:
    """A queue on its own client, built inside the test's event loop; the client is closed
    when ``asyncio.run`` cancels the tasks left over at the end of the test."""
    client = aioredis.Redis.from_url(url)

    async def close_at_exit() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await client.aclose()

    task = asyncio.get_running_loop().create_task(close_at_exit())
    _closers.add(task)
    task.add_done_callback(_closers.discard)
    return RedisQueue(client, "t", consumer or f"c{next(_names)}", lease_s)


def ready(interactive: int = 0, async_: int = 0, batch: int = 0) -> dict[Priority, int]:
    return {Priority.INTERACTIVE: interactive, Priority.ASYNC: async_, Priority.OFFLINE: batch}


class TestRedisQueue(QueueContract):
    @pytest.fixture
    def queue_factory(self, redis_url: str) -> Callable[[], Queue]:
        return lambda: make(redis_url)

    def test_claimed_entries_are_not_redelivered_until_recovered(  # type: ignore[override]
        self, redis_url: str
    ) -> None:
        """Redis: a claimed entry is leased; heartbeats keep it, and only once its lease has
        run out (its worker died) does another consumer reclaim it."""

        async def main() -> None:
            a, b = make(redis_url, "a", 0.3), make(redis_url, "b", 0.3)
            await a.put("x", Priority.ASYNC)
            (first,) = await a.get(5, 0)
            assert first.deliveries == 1 and first.receipt
            for _ in range(4):  # 0.4 s in all, past the lease, kept by heartbeats
                await asyncio.sleep(0.1)
                await a.extend([first])
                assert await b.get(5, 0) == []
            assert await b.recover() == 0  # a starting worker steals nothing
            await asyncio.sleep(0.4)  # a died: its lease runs out
            assert await b.recover() == 1  # counted, not claimed
            (again,) = await b.get(5, 0)
            assert (again.job_id, again.deliveries, again.receipt) == ("x", 2, first.receipt)
            await a.extend([first])  # a late heartbeat does not take it back
            await a.release(first)  # nor does a late release
            assert await a.get(5, 0) == [] and await b.get(5, 0) == []
            await b.ack(again)
            await a.ack(first)  # stale receipt: harmless
            assert await b.recover() == 0
            assert await b.get(5, 0) == []
            assert await b.depth() == ready()

        asyncio.run(main())

    def test_two_consumers_never_share_an_entry(self, redis_url: str) -> None:
        async def consume(queue: RedisQueue) -> list[str]:
            got: list[str] = []
            while batch := await queue.get(3, 0):
                got += [d.job_id for d in batch]
            return got

        async def main() -> tuple[list[str], list[str]]:
            await make(redis_url).put_many([f"j{i}" for i in range(50)], Priority.ASYNC)
            a, b = await asyncio.gather(consume(make(redis_url)), consume(make(redis_url)))
            return a, b

        a, b = asyncio.run(main())
        assert not set(a) & set(b)
        assert sorted(a + b) == sorted(f"j{i}" for i in range(50))
        assert len(a + b) == 50

    def test_blocked_get_wakes_on_a_put_from_another_client(self, redis_url: str) -> None:
        async def main() -> list[str]:
            consumer, producer = make(redis_url), make(redis_url)
            waiter = asyncio.create_task(consumer.get(5, 60.0))
            await asyncio.sleep(0.2)
            assert not waiter.done()
            await producer.put("late", Priority.OFFLINE)
            # woken by the put, not by its own 60 s block running out
            got = await asyncio.wait_for(waiter, 30.0)
            return [d.job_id for d in got]

        assert asyncio.run(main()) == ["late"]

    def test_dead_letter_records_and_removes(self, redis_url: str) -> None:
        async def main() -> None:
            queue = make(redis_url)
            await queue.put("x", Priority.OFFLINE)
            (d,) = await queue.get(5, 0)
            await queue.dead_letter(d, "boom")
            assert await queue.dead_letters() == [
                {"job_id": "x", "priority": "offline", "deliveries": "1", "reason": "boom"}
            ]
            assert await queue.get(5, 0) == []
            assert await queue.depth() == ready()
            await queue.dead_letter(d, "again")  # stale: no second record
            assert len(await queue.dead_letters()) == 1

        asyncio.run(main())

    def test_put_is_idempotent_until_ack(self, redis_url: str) -> None:
        async def main() -> None:
            queue = make(redis_url)
            await queue.put_many(["a", "a", "b"], Priority.ASYNC)
            (a,) = await queue.get(1, 0)
            await queue.put("a", Priority.ASYNC)  # still queued (claimed): not added
            (b,) = await queue.get(5, 0)
            assert (a.job_id, b.job_id) == ("a", "b")
            await queue.ack(a)
            await queue.put("a", Priority.ASYNC)  # done: a new request enqueues it again
            (again,) = await queue.get(5, 0)
            assert again.job_id == "a" and again.deliveries == 1
            await queue.ack(a)  # stale receipt: leaves the new entry alone
            assert await queue.recover() == 0
            await queue.release(again)
            assert [d.job_id for d in await queue.get(5, 0)] == ["a"]

        asyncio.run(main())

    def test_depth_counts_ready_entries(self, redis_url: str) -> None:
        async def main() -> None:
            queue = make(redis_url)
            assert await queue.depth() == ready()
            await queue.put_many(["b0", "b1", "b2"], Priority.OFFLINE)
            await queue.put_many(["i0", "i1"], Priority.INTERACTIVE)
            assert await queue.depth() == ready(interactive=2, batch=3)
            (i0,) = await queue.get(1, 0)
            assert await queue.depth() == ready(interactive=1, batch=3)
            await queue.ack(i0)
            await queue.get({Priority.OFFLINE: 2}, 0)
            assert await queue.depth() == ready(interactive=1, batch=1)

        asyncio.run(main())

    def test_destroyed_group_is_recreated(self, redis_url: str) -> None:
        async def main() -> None:
            queue = make(redis_url)
            await queue.put_many(["a", "b"], Priority.ASYNC)
            (a,) = await queue.get(1, 0)
            raw = aioredis.Redis.from_url(redis_url)
            await raw.xgroup_destroy("t:q:async", "workers")
            await raw.aclose()
            # the group is gone with its pending list: what is queued is delivered again
            assert await queue.depth() == ready(async_=2)
            got = await queue.get(5, 0)
            assert [(d.job_id, d.deliveries) for d in got] == [("a", 2), ("b", 1)]
            await queue.ack(a)
            await queue.put("c", Priority.ASYNC)
            assert [d.job_id for d in await queue.get(5, 0)] == ["c"]

        asyncio.run(main())

    def test_extra_entries_of_a_blocking_read_are_handed_back(self, redis_url: str) -> None:
        async def main() -> None:
            queue = make(redis_url)
            await queue.put("b", Priority.OFFLINE)
            await queue.put("i", Priority.INTERACTIVE)
            claim = queue._claim
            calls = 0

            async def miss_once(limits: dict[Priority, int], total: int) -> list[Delivery]:
                nonlocal calls
                calls += 1
                return [] if calls == 1 else await claim(limits, total)

            raw = aioredis.Redis.from_url(redis_url)
            entry = await raw.hget("t:queued", "b")
            queue._claim = miss_once  # type: ignore[method-assign,assignment]
            (first,) = await queue.get(1, 1.0)  # the blocking read returns both streams
            assert first.job_id == "i"
            assert await raw.hget("t:queued", "b") != entry  # b was read, then handed back
            await raw.aclose()
            assert await queue.depth() == ready(batch=1)
            (b,) = await queue.get(1, 0)
            assert (b.job_id, b.deliveries) == ("b", 1)

        asyncio.run(main())
