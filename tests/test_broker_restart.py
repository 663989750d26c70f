"""Long polls on an API node learn their jobs' ends across a Redis restart, whenever the jobs
end, and whichever connection comes back last (issue 56: a clean clone's compose check once
waited past a long poll's 60 s for jobs that had ended 1-4 s after Redis restarted).

The API node is this process's :class:`Service` over a real redis-server (its stores reached
directly), its events subscription through a TCP relay the test can hold, silence or refuse;
a worker node's part is its own client storing results and publishing, as the consumer does
(store, then publish). Each long poll waits 60 s; every answer must be the finished job, given
within ``LAG_S`` of the moment the store recorded it: a lost wake-up answers at the timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from asrserve.backends.backend import open_backend
from asrserve.bench.redis_process import RedisProcess
from asrserve.drivers.redis import connect
from asrserve.events import Finished
from asrserve.events.redis import RedisEvents
from asrserve.jobs.models import Job, new_job_id
from asrserve.jobs.redis import RedisJobStore
from asrserve.service.jobs import Service
from asrserve.settings import Settings
from asrserve.transcript import Transcript
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

WAIT_S = 60.0  # each long poll's wait
LAG_S = 10.0  # an answer this long after the store's record would be a wake-up lost
KEEPALIVE_S = 0.5  # the API node's subscription pings after this much quiet
DONE = Transcript(text="done", language="en", duration=1.0, segments=[])
Scenario = Callable[["Nodes"], Awaitable[None]]


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path / "redis").start()
    yield server
    server.kill()


@dataclasses.dataclass
class Nodes:
    """An API node (its Service, its events through ``api_link``) and a worker node's
    stores and events (through ``worker_link``), over one redis-server."""

    redis: RedisProcess
    service: Service
    api_events: RedisEvents
    api_link: TcpProxy
    worker_store: RedisJobStore
    worker_events: RedisEvents
    worker_link: TcpProxy

    async def queued_job(self) -> str:
        job = Job(id=new_job_id())
        await self.service.store.create(job)
        return job.id

    async def worker_finishes(self, job_id: str) -> float:
        """What the consumer does when a job ends: store the result, then publish; the
        store's time of it."""
        await self.worker_store.start(job_id)
        done = await self.worker_store.succeed(job_id, DONE)
        assert done is not None and done.finished_at is not None
        self.worker_events.finished(Finished(job_id))
        return done.finished_at

    def long_poll(self, job_id: str) -> asyncio.Task[tuple[str, float]]:
        async def poll() -> tuple[str, float]:
            job = await self.service.wait(job_id, WAIT_S)
            assert job is not None
            return job.status.value, time.time()

        return asyncio.create_task(poll())


@contextlib.asynccontextmanager
async def nodes_on(redis: RedisProcess, data_dir: Path) -> AsyncIterator[Nodes]:
    """The two nodes, their subscriptions listening, until the block ends."""
    settings = Settings(data_dir=data_dir, broker=redis.url, calibration="off")
    prefix = settings.redis_prefix
    backend = open_backend(settings)
    api_link = await TcpProxy(redis.port).start()
    worker_link = await TcpProxy(redis.port).start()
    clients = [connect(api_link.url), connect(worker_link.url), connect(redis.url)]
    api_events = RedisEvents(clients[0], prefix, keepalive_s=KEEPALIVE_S)
    worker_events = RedisEvents(clients[1], prefix)
    subscribed = asyncio.Event()
    api_events.on_resync(subscribed.set)
    nodes = Nodes(
        redis,
        Service(settings, dataclasses.replace(backend, events=api_events)),
        api_events,
        api_link,
        RedisJobStore(clients[2], prefix),
        worker_events,
        worker_link,
    )
    listeners = [asyncio.create_task(e.listen()) for e in (api_events, worker_events)]
    try:
        await within(subscribed.wait(), "the API node's first subscription")
        yield nodes
    finally:
        for task in listeners:
            task.cancel()
        await asyncio.gather(*listeners, return_exceptions=True)
        for events in (api_events, worker_events):
            await events.aclose()
        for close in backend.closers:
            await close()
        for client in clients:
            await client.aclose()
        await api_link.aclose()
        await worker_link.aclose()


async def within(awaitable: Awaitable[object], what: str) -> None:
    """``awaitable`` done within a long poll's wait, or the test fails naming ``what``."""
    try:
        async with asyncio.timeout(WAIT_S):
            await awaitable
    except TimeoutError:
        raise AssertionError(f"{what}: not within {WAIT_S:g} s") from None


class Heard(logging.Handler):
    """Sets ``seen`` when a record's message starts with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(self.prefix):
            self.seen.set()


def run_with_listeners(redis: RedisProcess, data_dir: Path, scenario: Scenario) -> None:
    async def main() -> None:
        async with nodes_on(redis, data_dir) as nodes:
            await scenario(nodes)

    asyncio.run(main())


def assert_answered(answers: dict[str, tuple[str, float]], stored_at: dict[str, float]) -> None:
    """Each long poll answered its job finished, within ``LAG_S`` of the store's record."""
    lags = {name: answered - stored_at[name] for name, (_, answered) in answers.items()}
    print(f"\nanswer minus store time, s: { {n: round(lag, 3) for n, lag in lags.items()} }")
    assert {name: status for name, (status, _) in answers.items()} == dict.fromkeys(
        answers, "succeeded"
    )
    assert {name for name, lag in lags.items() if lag > LAG_S} == set(), lags


def test_long_polls_learn_of_jobs_ended_before_during_and_after_a_restart(
    redis: RedisProcess, tmp_path: Path
) -> None:
    """Redis restarts while four long polls wait. The API node's subscription comes back
    through the driver's own reconnect (no error reaches the node), later than the worker's
    connection: the jobs stored and published in between were never delivered to it."""

    async def scenario(nodes: Nodes) -> None:
        names = ("before", "during", "after", "once_back")
        jobs = {name: await nodes.queued_job() for name in names}
        polls = {name: nodes.long_poll(job_id) for name, job_id in jobs.items()}
        stored_at = {"before": await nodes.worker_finishes(jobs["before"])}
        nodes.api_link.hold()  # the API node's next connection waits
        await asyncio.to_thread(redis.stop)  # SIGTERM: the AOF written, every client cut
        await asyncio.to_thread(redis.start)
        # the result that was ready while Redis was down is stored once it is back (the
        # consumer retries), then another job ends: both before the API node is back
        stored_at["during"] = await nodes.worker_finishes(jobs["during"])
        stored_at["after"] = await nodes.worker_finishes(jobs["after"])
        assert await nodes.worker_events.sent(WAIT_S)  # published: none to the API node
        nodes.api_link.release()
        missed = ("before", "during", "after")  # answered once the API node is back
        answers = {name: await polls[name] for name in missed}
        assert_answered(answers, stored_at)
        stored_at["once_back"] = await nodes.worker_finishes(jobs["once_back"])
        assert_answered({"once_back": await polls["once_back"]}, stored_at)

    run_with_listeners(redis, tmp_path / "data", scenario)


def test_a_subscription_gone_silent_is_made_again(redis: RedisProcess, tmp_path: Path) -> None:
    """The API node's connection stops carrying anything without closing (a broker host gone
    from the network): its pings go unanswered, it subscribes again, and its waiters read."""

    async def scenario(nodes: Nodes) -> None:
        job_id = await nodes.queued_job()
        poll = nodes.long_poll(job_id)
        nodes.api_link.silence()
        stored_at = {"silent": await nodes.worker_finishes(job_id)}
        assert_answered({"silent": await poll}, stored_at)

    run_with_listeners(redis, tmp_path / "data", scenario)


def test_a_publication_refused_is_sent_again(redis: RedisProcess, tmp_path: Path) -> None:
    """The worker stores a result, then cannot reach Redis to say so (its link refused) while
    the API node's subscription stays up: the publication is retried until it is heard."""

    async def scenario(nodes: Nodes) -> None:
        job_id = await nodes.queued_job()
        poll = nodes.long_poll(job_id)
        await nodes.worker_store.start(job_id)
        await nodes.worker_link.refuse()
        done = await nodes.worker_store.succeed(job_id, DONE)
        assert done is not None and done.finished_at is not None
        refused = Heard("event not published")
        logging.getLogger("asrserve.events.redis").addHandler(refused)
        try:
            nodes.worker_events.finished(Finished(job_id))
            await within(refused.seen.wait(), "the worker's publication refused")
        finally:
            logging.getLogger("asrserve.events.redis").removeHandler(refused)
        await nodes.worker_link.resume()
        assert_answered({"refused": await poll}, {"refused": done.finished_at})

    run_with_listeners(redis, tmp_path / "data", scenario)
