"""Worker nodes' reports in Redis, and what API nodes make of them."""

from __future__ import annotations

import json
import time

import pytest

from asrserve.api.errors import ApiError
from asrserve.distributed.admission import RedisAdmission
from asrserve.distributed.connection import connect
from asrserve.distributed.registry import WorkerRegistry, merge
from asrserve.jobs.models import Priority
from asrserve.settings import Settings
from tests.unit.conftest import Run


def test_live_reports_stale_ones_dropped_and_throughput_summed(run: Run, redis_url: str) -> None:
    client = connect(redis_url)
    registry = WorkerRegistry(client, "t", lease_s=1.0)
    run(registry.report("w1", {"devices": ["cuda:0"], "throughput": 40.0}))
    run(registry.report("w2", {"devices": ["cuda:0"], "throughput": None}))
    stale = {"node": "w0", "reported_at": time.time() - 10, "throughput": 99.0}
    run(client.hset("t:workers", "w0", json.dumps(stale)))
    assert [r["node"] for r in run(registry.alive())] == ["w1", "w2"]
    assert run(client.hexists("t:workers", "w0")) == 0  # a node that died is forgotten
    assert run(registry.throughput()) == 40.0
    run(registry.report("w2", {"throughput": 20.0}))
    assert run(registry.throughput()) == 60.0
    run(registry.forget("w1"))
    run(registry.forget("w2"))
    assert run(registry.throughput()) is None

    # an API node without inference estimates Retry-After from the workers' throughput
    settings = Settings(max_queued_jobs=1, redis_prefix="t")
    admission = RedisAdmission(settings, client, registry)
    run(admission.added(Priority.ASYNC, 120.0))
    run(registry.report("w3", {"throughput": 30.0}))
    with pytest.raises(ApiError) as full:
        run(admission.admit(Priority.ASYNC, 10.0))
    assert full.value.headers == {"Retry-After": "4"}  # one 120 s job too many at 30 s/s
    run(client.aclose())


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
    assert merge([])["devices"] == [] and merge([])["mean_batch_size"] == 0.0
