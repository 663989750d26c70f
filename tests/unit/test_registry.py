"""The deployment's nodes: the registry and lease contracts, run against the embedded
ones (this process alone) and the Redis ones, and how API nodes merge worker reports."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import redis.asyncio as aioredis

from asrserve.cluster.base import Duties, Lease, WorkerRegistry
from asrserve.cluster.local import LocalLease, LocalRegistry
from asrserve.cluster.merge import merge
from asrserve.cluster.redis import RedisLease, RedisRegistry
from tests.support.loop import Run


class RegistryContract:
    @pytest.fixture
    def registry(self) -> WorkerRegistry:
        raise NotImplementedError

    def test_a_reported_node_is_listed_until_forgotten(
        self, registry: WorkerRegistry, run: Run
    ) -> None:
        run(registry.report("w1", {"devices": ["cpu:0"]}))
        (report,) = run(registry.alive())
        assert report["node"] == "w1" and report["devices"] == ["cpu:0"]
        run(registry.forget("w1"))
        assert run(registry.alive()) == []

    def test_a_new_report_replaces_the_last(self, registry: WorkerRegistry, run: Run) -> None:
        run(registry.report("w1", {"items": 1}))
        run(registry.report("w1", {"items": 2}))
        assert [r["items"] for r in run(registry.alive())] == [2]

    def test_throughput_is_every_live_nodes_together(
        self, registry: WorkerRegistry, run: Run
    ) -> None:
        assert run(registry.throughput()) is None
        run(registry.report("w2", {"throughput": None}))  # nothing measured yet
        run(registry.report("w1", {"throughput": 40.0}))
        assert run(registry.throughput()) == 40.0
        run(registry.report("w2", {"throughput": 20.0}))
        assert run(registry.throughput()) == 60.0
        assert [r["node"] for r in run(registry.alive())] == ["w1", "w2"]


class TestLocalRegistry(RegistryContract):
    @pytest.fixture
    def registry(self) -> WorkerRegistry:
        return LocalRegistry()


class TestRedisRegistry(RegistryContract):
    @pytest.fixture
    def registry(self, redis_client: aioredis.Redis) -> WorkerRegistry:
        return RedisRegistry(redis_client, "t", lease_s=1.0)

    def test_a_node_that_stopped_reporting_is_forgotten(
        self, registry: WorkerRegistry, redis_client: aioredis.Redis, run: Run
    ) -> None:
        stale = {"node": "w0", "reported_at": time.time() - 10, "throughput": 99.0}
        run(redis_client.hset("t:workers", "w0", json.dumps(stale)))
        run(registry.report("w1", {"throughput": 40.0}))
        assert [r["node"] for r in run(registry.alive())] == ["w1"]
        assert run(redis_client.hexists("t:workers", "w0")) == 0
        assert run(registry.throughput()) == 40.0


async def holding(lease: Lease, duties: Duties, started: asyncio.Event) -> None:
    """Run ``lease`` until ``started`` is set (by the duties), then stop it."""
    task = asyncio.create_task(lease.run(duties))
    try:
        await asyncio.wait_for(started.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class LeaseContract:
    @pytest.fixture
    def lease(self) -> Lease:
        raise NotImplementedError

    def test_the_duties_run_while_the_lease_is_held(self, lease: Lease, run: Run) -> None:
        async def scenario() -> bool:
            started = asyncio.Event()

            async def duties() -> None:
                started.set()
                await asyncio.Event().wait()  # until the lease is given up

            await holding(lease, duties, started)
            return started.is_set()

        assert run(scenario()) is True

    def test_duties_that_fail_run_again(self, lease: Lease, run: Run) -> None:
        attempts: list[int] = []

        async def scenario() -> None:
            again = asyncio.Event()

            async def duties() -> None:
                attempts.append(len(attempts) + 1)
                if len(attempts) == 1:
                    raise RuntimeError("the first run fails")
                again.set()
                await asyncio.Event().wait()

            await holding(lease, duties, again)

        run(scenario())
        assert attempts == [1, 2]


class TestLocalLease(LeaseContract):
    @pytest.fixture
    def lease(self) -> Lease:
        return LocalLease(restart_s=0.01)


class TestRedisLease(LeaseContract):
    @pytest.fixture
    def lease(self, redis_client: aioredis.Redis) -> Lease:
        return RedisLease(redis_client, "t:leader", "node-a", ttl_s=0.3)

    def test_a_released_lease_is_taken_over_by_another_node(
        self, lease: Lease, redis_client: aioredis.Redis, run: Run
    ) -> None:
        other = RedisLease(redis_client, "t:leader", "node-b", ttl_s=0.3)
        holders: list[bytes | str | None] = []

        async def scenario() -> None:
            started = {"node-a": asyncio.Event(), "node-b": asyncio.Event()}

            def duties(node: str) -> Duties:
                async def run_duties() -> None:
                    holders.append(await redis_client.get("t:leader"))
                    started[node].set()
                    await asyncio.Event().wait()  # until the lease is given up

                return run_duties

            await holding(lease, duties("node-a"), started["node-a"])  # then released
            await holding(other, duties("node-b"), started["node-b"])

        run(scenario())
        assert holders == [b"node-a", b"node-b"]  # each ran its duties holding the key
        assert run(redis_client.exists("t:leader")) == 0  # released on the way out


def test_merged_view_of_the_workers() -> None:
    one = {
        "node": "w1", "policy": "greedy", "batches": 2, "items": 6, "mean_queue_wait_s": 0.5,
        "audio_seconds": 30.0, "batch_sizes": {"2": 1, "4": 1}, "padded_frames": 10,
        "total_frames": 100, "device_busy_seconds": {"cuda:0": 1.0, "cuda:1": 1.5},
        "pending_by_window": {"10s": 1, "5s": 2},
    }  # fmt: skip
    two = {
        "node": "w2", "policy": "greedy", "batches": 1, "items": 1, "mean_queue_wait_s": 1.0,
        "audio_seconds": 5.0, "batch_sizes": {"1": 1, "10": 1, "2": 1}, "padded_frames": 0,
        "total_frames": 100, "device_busy_seconds": {"cpu:0": 2.0},
    }  # fmt: skip
    view = merge([one, two])
    assert view["policy"] == "greedy" and view["batches"] == 3 and view["items"] == 7
    assert view["devices"] == ["w1/cuda:0", "w1/cuda:1", "w2/cpu:0"]
    assert list(view["batch_sizes"].items()) == [("1", 1), ("2", 2), ("4", 1), ("10", 1)]
    assert list(view["pending_by_window"]) == ["5s", "10s"]
    assert view["mean_batch_size"] == pytest.approx(7 / 3)
    assert view["mean_queue_wait_s"] == pytest.approx((0.5 * 6 + 1.0) / 7)
    assert view["padding_waste"] == 0.05 and view["audio_seconds"] == 35.0
    assert view["device_s_per_audio_s"] == round(4.5 / 35.0, 4)
    assert merge([])["devices"] == [] and merge([])["mean_batch_size"] == 0.0
