"""Structured logs and Prometheus metrics, without a server."""

from __future__ import annotations

import json
import logging
import sys
import types

import pytest

from asrserve.batcher.stats import BatchRecord, SchedulerStats
from asrserve.cli.logs import JsonFormatter
from asrserve.metrics import Metrics


def test_json_lines_carry_extra_fields() -> None:
    record = logging.LogRecord(
        "asrserve.batcher", logging.INFO, __file__, 1, "batch %s", ("b1",), None
    )
    record.pass_id = "b1"
    record.size = 4
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "batch b1" and line["level"] == "info"
    assert (line["pass_id"], line["size"], line["logger"]) == ("b1", 4, "asrserve.batcher")


def test_batch_metrics_and_scheduler_gauges() -> None:
    metrics = Metrics()
    stats = SchedulerStats(devices=["0"])
    metrics.watch_scheduler(stats)
    record = BatchRecord(
        device="0",
        size=3,
        started=1.0,
        finished=1.5,
        waits=[0.0, 0.1, 0.2],
        audio_seconds=12.0,
        padded_frames=300,
        total_frames=1500,
    )
    stats.record(record)
    metrics.observe_batch(record)
    text = metrics.render().decode()
    assert 'asrserve_batch_size_bucket{le="4.0"} 1.0' in text
    assert "asrserve_queue_wait_seconds_count 3.0" in text
    assert "asrserve_audio_seconds_processed_total 12.0" in text
    assert "asrserve_padding_waste_ratio 0.2" in text
    assert 'asrserve_queued_chunks{priority="interactive"} 0.0' in text


class FakeNvml(types.ModuleType):
    def __init__(self, works: bool) -> None:
        super().__init__("pynvml")
        self.works = works

    def nvmlInit(self) -> None:
        if not self.works:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(gpu=87)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(used=2**30, total=2**34)


def test_gpu_metrics_are_absent_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(works=False))
    metrics = Metrics()
    assert metrics.watch_gpus([0]) is False
    assert "asrserve_gpu" not in metrics.render().decode()


def test_gpu_metrics_come_from_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(works=True))
    metrics = Metrics()
    assert metrics.watch_gpus([0, 1]) is True
    text = metrics.render().decode()
    assert 'asrserve_gpu_utilization_ratio{device="cuda:1"} 0.87' in text
    assert 'asrserve_gpu_memory_used_bytes{device="cuda:0"} 1.073741824e+09' in text
