"""Contract test classes shared by more than one test module: a subclass per backend
provides the fixture (``queue_factory``) and is collected where it is defined."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from asrserve.queue.base import Queue
from asrserve.vocabulary import Priority


class QueueContract:
    def test_caps_per_priority(self, queue_factory: Callable[[], Queue]) -> None:
        async def main() -> None:
            queue = queue_factory()
            await queue.put_many([f"b{i}" for i in range(5)], Priority.OFFLINE)
            await queue.put("i", Priority.INTERACTIVE)
            await queue.put("a", Priority.ASYNC)
            online = await queue.get({Priority.INTERACTIVE: 4, Priority.ASYNC: 4}, 0)
            assert [d.job_id for d in online] == ["i", "a"]
            offline = await queue.get({Priority.OFFLINE: 2}, 0)
            assert [d.job_id for d in offline] == ["b0", "b1"]  # put_many keeps the order
            assert await queue.get({Priority.INTERACTIVE: 4}, 0) == []
            assert [d.job_id for d in await queue.get(10, 0)] == ["b2", "b3", "b4"]

        asyncio.run(main())

    def test_a_total_caps_the_claim_across_priorities(
        self, queue_factory: Callable[[], Queue]
    ) -> None:
        """A cap per priority and one for all (a lane's room): the most urgent first."""

        async def main() -> list[str]:
            queue = queue_factory()
            await queue.put_many(["a1", "a2", "a3"], Priority.ASYNC)
            await queue.put_many(["i1", "i2"], Priority.INTERACTIVE)
            caps = {Priority.INTERACTIVE: 3, Priority.ASYNC: 3}
            return [d.job_id for d in await queue.get(caps, 0, total=3)]

        assert asyncio.run(main()) == ["i1", "i2", "a1"]

    def test_discarded_entries_are_never_claimed_and_held_ones_stay_their_consumers(
        self, queue_factory: Callable[[], Queue]
    ) -> None:
        """A cancelled batch's entries go at once; one a worker holds is its to finish."""

        async def main() -> None:
            queue = queue_factory()
            await queue.put_many([f"b{i}" for i in range(5)], Priority.OFFLINE)
            (held,) = await queue.get({Priority.OFFLINE: 1}, 0)
            await queue.discard(["b0", "b1", "b3", "never-queued"], Priority.OFFLINE)
            assert (await queue.depth())[Priority.OFFLINE] == 2
            assert [d.job_id for d in await queue.get(10, 0)] == ["b2", "b4"]
            await queue.ack(held)
            await queue.put("b1", Priority.OFFLINE)  # a discarded id may be queued again
            assert [d.job_id for d in await queue.get(10, 0)] == ["b1"]

        asyncio.run(main())

    def test_concurrent_consumers_both_wake(self, queue_factory: Callable[[], Queue]) -> None:
        async def main() -> set[str]:
            queue = queue_factory()
            online = asyncio.create_task(queue.get({Priority.INTERACTIVE: 1}, 5.0))
            offline = asyncio.create_task(queue.get({Priority.OFFLINE: 1}, 5.0))
            await asyncio.sleep(0.01)
            await queue.put("b", Priority.OFFLINE)
            await queue.put("i", Priority.INTERACTIVE)
            done = await asyncio.wait_for(asyncio.gather(online, offline), 2.0)
            return {d.job_id for batch in done for d in batch}

        assert asyncio.run(main()) == {"i", "b"}

    def test_priority_then_fifo(self, queue_factory: Callable[[], Queue]) -> None:
        async def main() -> list[str]:
            queue = queue_factory()
            await queue.put("a", Priority.OFFLINE)
            await queue.put("b", Priority.ASYNC)
            await queue.put("c", Priority.INTERACTIVE)
            await queue.put("d", Priority.ASYNC)
            await queue.put("b", Priority.ASYNC)  # idempotent
            return [d.job_id for d in await queue.get(10, 0)]

        assert asyncio.run(main()) == ["c", "b", "d", "a"]

    def test_claimed_entries_are_not_redelivered_until_recovered(
        self, queue_factory: Callable[[], Queue]
    ) -> None:
        async def main() -> None:
            queue = queue_factory()
            await queue.put("a", Priority.ASYNC)
            (first,) = await queue.get(5, 0)
            assert first.deliveries == 1
            assert await queue.get(5, 0) == []
            assert await queue.recover() == 1  # the consumer died
            (again,) = await queue.get(5, 0)
            assert again.deliveries == 2
            await queue.ack(again)
            assert await queue.recover() == 0
            assert await queue.get(5, 0) == []

        asyncio.run(main())

    def test_get_blocks_until_put(self, queue_factory: Callable[[], Queue]) -> None:
        async def main() -> list[str]:
            queue = queue_factory()
            waiter = asyncio.create_task(queue.get(5, 5.0))
            await asyncio.sleep(0.01)
            assert not waiter.done()
            await queue.put("late", Priority.ASYNC)
            return [d.job_id for d in await asyncio.wait_for(waiter, 2.0)]

        assert asyncio.run(main()) == ["late"]

    def test_release_and_depth(self, queue_factory: Callable[[], Queue]) -> None:
        async def main() -> None:
            queue = queue_factory()
            await queue.put("a", Priority.ASYNC)
            await queue.put("b", Priority.INTERACTIVE)
            assert (await queue.depth())[Priority.ASYNC] == 1
            (b,) = await queue.get(1, 0)
            await queue.release(b)
            (again,) = await queue.get(1, 0)
            assert again.job_id == "b" and again.deliveries == 1

        asyncio.run(main())
