"""The admission and rate-limit contracts, run against the embedded ones (in memory) and
the Redis ones (shared by every API node)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from asrserve.admission.base import Admission, Backlog
from asrserve.admission.local import LocalAdmission
from asrserve.admission.redis import RedisAdmission
from asrserve.auth.keys import DeviceUsage, utc_day
from asrserve.auth.limits import LocalRateLimiter, RateLimiter, RedisRateLimiter
from asrserve.backends.backend import open_backend
from asrserve.cluster.base import WorkerRegistry
from asrserve.cluster.local import LocalRegistry
from asrserve.cluster.redis import RedisRegistry
from asrserve.errors import QueueFull, TooLarge
from asrserve.jobs.models import Job
from asrserve.settings import Settings
from asrserve.vocabulary import Priority
from tests.support.loop import Run

# Each key's share: one job, 50 s of audio of a class.
SETTINGS = Settings(
    max_queued_jobs=2, max_queued_audio_s=100.0, max_queued_share=0.5, redis_prefix="t"
)
# 20 device seconds a class, 10 a key: 40 s of audio at 0.5 device s per audio s.
DEVICE = Settings(
    max_queued_jobs=10,
    max_queued_audio_s=100.0,
    max_queued_device_s=20.0,
    max_queued_share=0.5,
    redis_prefix="t",
)
Nodes = tuple[Admission, Admission]


class AdmissionContract:
    """``nodes``: two API nodes' views of one backlog (embedded: the one node, twice)."""

    @pytest.fixture
    def registry(self) -> WorkerRegistry:
        raise NotImplementedError

    @pytest.fixture
    def nodes_for(self, registry: WorkerRegistry) -> Callable[[Settings], Nodes]:
        raise NotImplementedError

    @pytest.fixture
    def nodes(self, nodes_for: Callable[[Settings], Nodes]) -> Nodes:
        return nodes_for(SETTINGS)

    def test_over_the_limit_is_queue_full_with_a_retry_after(self, nodes: Nodes, run: Run) -> None:
        admission, other = nodes
        admission.throughput = lambda: 5.0
        run(admission.admit(Priority.ASYNC, 30.0))
        run(admission.added(Priority.ASYNC, 30.0))
        run(other.added(Priority.ASYNC, 30.0))
        with pytest.raises(QueueFull) as full:
            run(admission.admit(Priority.ASYNC, 10.0))
        assert full.value.code == "queue_full"
        assert full.value.retry_after == 6  # one 30 s job too many at 5 audio s/s

    def test_each_class_has_its_own_limits(self, nodes: Nodes, run: Run) -> None:
        admission, _ = nodes
        run(admission.added(Priority.ASYNC, 30.0, count=2))
        run(admission.admit(Priority.INTERACTIVE, 10.0))  # async's 2 jobs are not its
        with pytest.raises(QueueFull):
            run(admission.admit(Priority.ASYNC, 10.0))  # 2 jobs wait: the class is full

    def test_a_request_the_empty_class_cannot_hold_is_too_large_not_queue_full(
        self, nodes: Nodes, run: Run
    ) -> None:
        """No wait makes it fit, so no Retry-After: 413 ``over_queue_limit``."""
        admission, _ = nodes
        with pytest.raises(TooLarge) as big:
            run(admission.admit(Priority.INTERACTIVE, 101.0))
        assert (big.value.code, big.value.retry_after) == ("over_queue_limit", None)
        assert str(big.value) == (
            "the request (101 s of audio) is more than the interactive queue may hold at once"
            " (2 jobs, 100 s of audio)"
        )

    def test_a_finished_job_makes_room_and_counts_never_go_negative(
        self, nodes: Nodes, run: Run
    ) -> None:
        admission, other = nodes
        run(admission.added(Priority.ASYNC, 30.0, count=2))
        run(other.finished(Job(id="j", priority=Priority.ASYNC, admitted_s=30.0)))
        run(admission.admit(Priority.ASYNC, 10.0))
        run(admission.finished(Job(id="k", priority=Priority.ASYNC, admitted_s=9.0)))
        run(admission.finished(Job(id="l", priority=Priority.ASYNC, admitted_s=9.0)))
        assert run(other.view())["async"] == {"jobs": 0, "audio_s": 0.0}

    def test_reset_starts_from_the_unfinished_jobs(self, nodes: Nodes, run: Run) -> None:
        admission, other = nodes
        run(admission.added(Priority.ASYNC, 30.0))
        run(admission.reset([Job(id="a", priority=Priority.OFFLINE, admitted_s=5.0)]))
        assert run(other.view()) == {
            "interactive": {"jobs": 0, "audio_s": 0.0},
            "async": {"jobs": 0, "audio_s": 0.0},
            "offline": {"jobs": 1, "audio_s": 5.0},
        }

    def test_a_key_past_its_share_is_refused_while_another_fits(
        self, nodes: Nodes, run: Run
    ) -> None:
        admission, other = nodes
        admission.throughput = lambda: 5.0
        run(admission.added(Priority.ASYNC, 20.0, owner="a"))
        with pytest.raises(QueueFull) as full:
            run(other.admit(Priority.ASYNC, 10.0, owner="a"))
        assert full.value.code == "queue_full"
        assert "you hold 1 jobs (20 s of audio) of the async queue" in str(full.value)
        run(other.admit(Priority.ASYNC, 10.0, owner="b"))  # the class has room for b
        run(other.admit(Priority.INTERACTIVE, 10.0, owner="a"))  # a share per class
        assert run(other.held(Priority.ASYNC, "a")) == Backlog(jobs=1, audio_s=20.0)

    def test_a_key_holding_nothing_may_queue_one_request_longer_than_its_share(
        self, nodes: Nodes, run: Run
    ) -> None:
        admission, _ = nodes
        run(admission.admit(Priority.ASYNC, 80.0, owner="a"))  # share 50 s, class 100 s
        run(admission.added(Priority.ASYNC, 80.0, owner="a"))
        with pytest.raises(QueueFull):
            run(admission.admit(Priority.ASYNC, 1.0, owner="a"))

    def test_shares_are_given_back_on_finish_and_rebuilt_by_reset(
        self, nodes: Nodes, run: Run
    ) -> None:
        admission, other = nodes
        run(admission.added(Priority.ASYNC, 20.0, owner="a"))
        run(other.finished(Job(id="j", priority=Priority.ASYNC, admitted_s=20.0, owner="a")))
        assert run(admission.held(Priority.ASYNC, "a")) == Backlog()
        run(admission.admit(Priority.ASYNC, 10.0, owner="a"))
        run(other.reset([Job(id="k", priority=Priority.ASYNC, admitted_s=5.0, owner="b")]))
        assert run(admission.held(Priority.ASYNC, "b")) == Backlog(jobs=1, audio_s=5.0)
        with pytest.raises(QueueFull):
            run(admission.admit(Priority.ASYNC, 10.0, owner="b"))
        run(admission.admit(Priority.ASYNC, 10.0, owner="a"))

    def test_a_node_without_inference_uses_the_workers_throughput(
        self, nodes: Nodes, registry: WorkerRegistry, run: Run
    ) -> None:
        admission, _ = nodes
        run(admission.added(Priority.ASYNC, 120.0, count=2))
        run(registry.report("w3", {"throughput": 30.0}))
        with pytest.raises(QueueFull) as full:
            run(admission.admit(Priority.ASYNC, 10.0))
        assert full.value.retry_after == 2  # one 60 s job too many at 30 s/s

    def test_a_limit_in_device_seconds_counts_audio_at_the_workers_measured_cost(
        self, nodes_for: Callable[[Settings], Nodes], registry: WorkerRegistry, run: Run
    ) -> None:
        admission, other = nodes_for(DEVICE)
        run(registry.report("w1", {"audio_seconds": 40.0, "device_busy_seconds": {"0": 8.0}}))
        run(registry.report("w2", {"audio_seconds": 20.0, "device_busy_seconds": {"0": 22.0}}))
        run(other.added(Priority.ASYNC, 30.0))
        run(admission.admit(Priority.ASYNC, 10.0))  # 40 s: 20 device s, the limit
        with pytest.raises(QueueFull) as full:
            run(admission.admit(Priority.ASYNC, 11.0))
        assert "(1 jobs, 30 s of audio, about 15 device seconds waiting)" in str(full.value)

    def test_a_keys_share_counts_its_audio_at_its_own_higher_cost(
        self, nodes_for: Callable[[Settings], Nodes], run: Run
    ) -> None:
        """A key whose passes took 2 device s per audio s today may hold 5 s of audio of
        the class; another, at the measured 0.5, 20 s."""
        admission, other = nodes_for(DEVICE)
        admission.device_cost = lambda: 0.5
        admission.key_usage = usage({"loops": DeviceUsage(20.0, 10.0)})
        run(other.added(Priority.ASYNC, 4.0, owner="loops"))
        run(other.added(Priority.ASYNC, 4.0, owner="plain"))
        run(admission.admit(Priority.ASYNC, 15.0, owner="plain"))
        with pytest.raises(QueueFull) as full:
            run(admission.admit(Priority.ASYNC, 2.0, owner="loops"))
        assert "you hold 1 jobs (4 s of audio, about 8 device seconds)" in str(full.value)


def usage(spent: dict[str, DeviceUsage]) -> Callable[[str], Awaitable[DeviceUsage]]:
    async def key_usage(owner: str) -> DeviceUsage:
        return spent.get(owner, DeviceUsage())

    return key_usage


class TestLocalAdmission(AdmissionContract):
    @pytest.fixture
    def registry(self) -> WorkerRegistry:
        return LocalRegistry()

    @pytest.fixture
    def nodes_for(self, registry: WorkerRegistry) -> Callable[[Settings], Nodes]:
        def nodes(settings: Settings) -> Nodes:
            admission = LocalAdmission(settings, registry)
            return admission, admission

        return nodes


class TestRedisAdmission(AdmissionContract):
    @pytest.fixture
    def registry(self, redis_client: aioredis.Redis) -> WorkerRegistry:
        return RedisRegistry(redis_client, "t", lease_s=30.0)

    @pytest.fixture
    def nodes_for(
        self, registry: WorkerRegistry, redis_client: aioredis.Redis
    ) -> Callable[[Settings], Nodes]:
        def nodes(settings: Settings) -> Nodes:
            prefix = settings.redis_prefix
            return (
                RedisAdmission(settings, redis_client, prefix, registry),
                RedisAdmission(settings, redis_client, prefix, registry),
            )

        return nodes


Limiters = tuple[RateLimiter, RateLimiter]


class RateLimiterContract:
    """``limiters``: two API nodes' limiters over one budget (embedded: the one, twice)."""

    @pytest.fixture
    def limiters(self) -> Limiters:
        raise NotImplementedError

    def test_a_minutes_worth_then_an_even_wait(self, limiters: Limiters, run: Run) -> None:
        one, two = limiters
        taken = [run(limiter.take("k", 4)) for limiter in (one, two, one, two)]
        assert taken == [(0.0, 3), (0.0, 2), (0.0, 1), (0.0, 0)]
        wait, left = run(two.take("k", 4))
        assert wait == pytest.approx(15.0, abs=0.5) and left == 0  # one request per 15 s

    def test_each_key_has_its_own_bucket(self, limiters: Limiters, run: Run) -> None:
        one, _ = limiters
        for _ in range(2):
            run(one.take("k", 2))
        assert run(one.take("k", 2))[0] > 0
        assert run(one.take("other", 2)) == (0.0, 1)


class TestLocalRateLimiter(RateLimiterContract):
    @pytest.fixture
    def limiters(self) -> Limiters:
        limiter = LocalRateLimiter(clock=lambda: 0.0)
        return limiter, limiter

    def test_the_bucket_refills_evenly(self, run: Run) -> None:
        now = [0.0]
        limiter = LocalRateLimiter(clock=lambda: now[0])
        assert [run(limiter.take("k", 3))[0] for _ in range(3)] == [0.0, 0.0, 0.0]
        assert run(limiter.take("k", 3))[0] == pytest.approx(20.0)
        now[0] = 20.0
        assert run(limiter.take("k", 3)) == (0.0, 0)
        assert run(limiter.take("k", 3))[0] == pytest.approx(20.0)


class TestRedisRateLimiter(RateLimiterContract):
    @pytest.fixture
    def limiters(self, redis_client: aioredis.Redis) -> Limiters:
        return RedisRateLimiter(redis_client, "t"), RedisRateLimiter(redis_client, "t")


def test_the_backends_admission_reads_a_keys_device_usage_of_today(
    tmp_path: Path, run: Run
) -> None:
    backend = open_backend(Settings(data_dir=tmp_path))
    try:
        run(backend.keys.spend({"key_a": DeviceUsage(2.0, 4.0)}, utc_day()))
        run(backend.keys.spend({"key_a": DeviceUsage(8.0, 1.0)}, "2024-01-01"))
        assert run(backend.admission.key_usage("key_a")) == DeviceUsage(2.0, 4.0)
    finally:
        run(backend.aclose())
