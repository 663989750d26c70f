"""The events contract, run against the in-process events and the Redis ones."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis

from asrserve.events.base import Finished, JobEvents
from asrserve.events.local import LocalEvents
from asrserve.events.redis import RedisEvents
from tests.support.loop import Run


class EventsContract:
    @pytest.fixture
    def events(self) -> Iterator[JobEvents]:
        raise NotImplementedError

    def test_finished_wakes_the_jobs_waiters_only(self, events: JobEvents, run: Run) -> None:
        async def woken() -> tuple[bool, bool]:
            with events.subscribe("job_a") as a, events.subscribe("job_b") as b:
                events.finished(Finished("job_a"))
                return a.is_set(), b.is_set()

        assert run(woken()) == (True, False)

    def test_finish_listeners_hear_the_notice(self, events: JobEvents, run: Run) -> None:
        heard: list[Finished] = []
        events.on_finish(heard.append)

        async def finish() -> None:
            events.finished(Finished("job_a", "batch_1", callback=True))

        run(finish())
        assert heard == [Finished("job_a", "batch_1", callback=True)]

    def test_progress_wakes_the_jobs_waiters_only(self, events: JobEvents, run: Run) -> None:
        async def woken() -> tuple[bool, bool]:
            with events.subscribe("job_a") as a, events.subscribe("job_b") as b:
                events.progressed("job_a")
                return a.is_set(), b.is_set()

        assert run(woken()) == (True, False)

    def test_a_batch_end_wakes_the_batchs_waiters_only(self, events: JobEvents, run: Run) -> None:
        async def woken() -> tuple[bool, bool]:
            with events.subscribe("batch_a") as a, events.subscribe("batch_b") as b:
                events.batch_ended("batch_a")
                return a.is_set(), b.is_set()

        assert run(woken()) == (True, False)

    def test_cancel_reaches_its_listeners_and_wakes_waiters(
        self, events: JobEvents, run: Run
    ) -> None:
        cancelled: list[str] = []
        events.on_cancel(cancelled.append)

        async def cancel() -> bool:
            with events.subscribe("job_a") as waiter:
                events.cancelled("job_a")
                return waiter.is_set()

        assert run(cancel()) is True
        assert cancelled == ["job_a"]

    def test_batch_api_changes_reach_their_listeners(self, events: JobEvents, run: Run) -> None:
        looked: list[str] = []
        events.on_batch_api_changed(lambda: looked.append("runner"))

        async def change() -> None:
            events.batch_api_changed()

        run(change())
        assert looked == ["runner"]


class TestLocalEvents(EventsContract):
    @pytest.fixture
    def events(self) -> Iterator[JobEvents]:
        yield LocalEvents()


class TestRedisEvents(EventsContract):
    @pytest.fixture
    def events(self, redis_client: aioredis.Redis, run: Run) -> Iterator[JobEvents]:
        events = RedisEvents(redis_client, "test")
        yield events
        run(events.aclose())

    def test_other_nodes_events_are_delivered_once(
        self, redis_client: aioredis.Redis, run: Run
    ) -> None:
        """A node hears another node's events (waiters woken by progress and by the end,
        listeners told), and not its own a second time."""

        async def scenario() -> tuple[list[Finished], list[Finished], bool]:
            here, there = RedisEvents(redis_client, "test"), RedisEvents(redis_client, "test")
            heard_here: list[Finished] = []
            heard_there: list[Finished] = []
            here.on_finish(heard_here.append)
            there.on_finish(heard_there.append)
            subscribed = {node: asyncio.Event() for node in ("here", "there")}
            here.on_resync(subscribed["here"].set)
            there.on_resync(subscribed["there"].set)
            batches_seen = asyncio.Event()
            here.on_batch_api_changed(batches_seen.set)
            listeners = [asyncio.create_task(node.listen()) for node in (here, there)]
            try:
                await asyncio.wait_for(asyncio.gather(*(e.wait() for e in subscribed.values())), 5)
                with there.subscribe("job_b") as follower:
                    here.progressed("job_b")
                    await asyncio.wait_for(follower.wait(), 5)
                with there.subscribe("batch_a") as batch_waiter:
                    here.batch_ended("batch_a")
                    await asyncio.wait_for(batch_waiter.wait(), 5)
                with there.subscribe("job_a") as waiter:
                    here.finished(Finished("job_a", callback=True))
                    await asyncio.wait_for(waiter.wait(), 5)
                # pub/sub keeps the order: once this arrives, "here" has seen its own notice
                there.batch_api_changed()
                await asyncio.wait_for(batches_seen.wait(), 5)
                return heard_here, heard_there, waiter.is_set()
            finally:
                for task in listeners:
                    task.cancel()
                await asyncio.gather(*listeners, return_exceptions=True)
                await here.aclose()
                await there.aclose()

        heard_here, heard_there, woken = run(scenario())
        assert woken is True
        assert heard_there == [Finished("job_a", callback=True)]
        assert heard_here == [Finished("job_a", callback=True)]  # delivered here once
