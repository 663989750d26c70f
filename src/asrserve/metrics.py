"""Prometheus metrics, in a registry per app (no process-global state)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from asrserve.batcher.stats import BatchRecord, SchedulerStats
from asrserve.jobs.models import Job
from asrserve.vocabulary import Priority

BATCH_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128)
SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""The method label's values besides ``other``: a client may send any token as a method."""


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.http_requests = Counter(
            "asrserve_http_requests", "HTTP requests", ["route", "method", "status"], registry=r
        )
        self.http_latency = Histogram(
            "asrserve_http_request_seconds",
            "HTTP request latency",
            ["route", "method"],
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.jobs = Counter("asrserve_jobs", "Finished jobs by outcome", ["outcome"], registry=r)
        self.batch_size = Histogram(
            "asrserve_batch_size", "Chunks per batch", buckets=BATCH_BUCKETS, registry=r
        )
        self.queue_wait = Histogram(
            "asrserve_queue_wait_seconds",
            "Chunk wait between enqueue and dispatch",
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.compute = Histogram(
            "asrserve_batch_compute_seconds",
            "Device time per batch",
            ["device"],
            buckets=SECONDS_BUCKETS,
            registry=r,
        )
        self.audio = Counter(
            "asrserve_audio_seconds_processed",
            "Audio seconds decoded on devices (a window's fallback passes count once)",
            registry=r,
        )
        self.padded = Counter(
            "asrserve_padded_frames", "Encoder frames that were padding", registry=r
        )
        self.frames = Counter("asrserve_encoder_frames", "Encoder frames run", registry=r)
        self.busy = Counter(
            "asrserve_device_busy_seconds", "Seconds each device computed", ["device"], registry=r
        )

    def observe_batch(self, record: BatchRecord) -> None:
        self.batch_size.observe(record.size)
        for wait in record.waits:
            self.queue_wait.observe(wait)
        self.compute.labels(record.device).observe(record.compute)
        self.busy.labels(record.device).inc(record.compute)
        self.audio.inc(record.new_seconds)
        self.padded.inc(record.padded_frames)
        self.frames.inc(record.total_frames)

    def job_finished(self, job: Job) -> None:
        self.jobs.labels(job.status.value).inc()

    def watch_scheduler(self, stats: SchedulerStats) -> None:
        self.registry.register(_SchedulerCollector(stats))

    def watch_uploads(self, receiving: Callable[[], int]) -> None:
        """``asrserve_uploads_receiving``: the upload bodies being received, read at scrape
        time from ``receiving``."""
        self.registry.register(_UploadsCollector(receiving))

    def watch_in_flight(self, held: Callable[[Priority], int]) -> None:
        """``asrserve_worker_requests_in_flight{priority}``: the jobs this node's consumer
        has claimed from the queue and not finished, read at scrape time from ``held``."""
        self.registry.register(_InFlightCollector(held))

    def watch_gpus(self, indices: Sequence[int]) -> bool:
        collector = nvml_collector(indices)
        if collector is not None:
            self.registry.register(collector)
        return collector is not None

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """One HTTP request: ``route`` is its route template (bounded by the app), a method
        outside the standard ones counts as "other" (a client cannot add label values)."""
        method = method if method in HTTP_METHODS else "other"
        self.http_requests.labels(route, method, str(status)).inc()
        self.http_latency.labels(route, method).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _SchedulerCollector(Collector):
    """Gauges read from the scheduler's live counters at scrape time."""

    def __init__(self, stats: SchedulerStats) -> None:
        self._stats = stats

    def collect(self) -> Iterable[Metric]:
        stats = self._stats
        chunks = GaugeMetricFamily(
            "asrserve_queued_chunks", "Chunks waiting for a device", labels=["priority"]
        )
        seconds = GaugeMetricFamily(
            "asrserve_queued_audio_seconds",
            "Audio seconds waiting for a device",
            labels=["priority"],
        )
        for priority in Priority:
            name = priority.name.lower()
            chunks.add_metric([name], stats.queued_items[priority])
            seconds.add_metric([name], max(stats.queued_seconds[priority], 0.0))
        busy = GaugeMetricFamily(
            "asrserve_device_busy_fraction",
            "Share of wall time each device computed",
            labels=["device"],
        )
        for device, fraction in stats.busy_fraction().items():
            busy.add_metric([device], fraction)
        waste = GaugeMetricFamily(
            "asrserve_padding_waste_ratio", "Padded encoder frames / all encoder frames"
        )
        waste.add_metric([], stats.padding_waste())
        yield from (chunks, seconds, busy, waste)


class _UploadsCollector(Collector):
    def __init__(self, receiving: Callable[[], int]) -> None:
        self._receiving = receiving

    def collect(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(
            "asrserve_uploads_receiving",
            "Upload bodies being received (each holds a slot of max_concurrent_uploads)",
            value=self._receiving(),
        )


class _InFlightCollector(Collector):
    def __init__(self, held: Callable[[Priority], int]) -> None:
        self._held = held

    def collect(self) -> Iterable[Metric]:
        gauge = GaugeMetricFamily(
            "asrserve_worker_requests_in_flight",
            "Jobs this worker claimed from the queue and has not finished (decoding, waiting"
            " for or on its devices, storing the result), by priority",
            labels=["priority"],
        )
        for priority in Priority:
            gauge.add_metric([priority.name.lower()], self._held(priority))
        yield gauge


class _NvmlCollector(Collector):
    """GPU utilization and memory from NVML, read at scrape time."""

    def __init__(self, nvml: Any, indices: Sequence[int]) -> None:
        self._nvml = nvml
        self._handles = {i: nvml.nvmlDeviceGetHandleByIndex(i) for i in indices}

    def collect(self) -> Iterable[Metric]:
        util = GaugeMetricFamily(
            "asrserve_gpu_utilization_ratio", "GPU busy (NVML)", labels=["device"]
        )
        used = GaugeMetricFamily(
            "asrserve_gpu_memory_used_bytes", "GPU memory used (NVML)", labels=["device"]
        )
        total = GaugeMetricFamily(
            "asrserve_gpu_memory_total_bytes", "GPU memory (NVML)", labels=["device"]
        )
        for index, handle in self._handles.items():
            name = f"cuda:{index}"
            util.add_metric([name], self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100)
            memory = self._nvml.nvmlDeviceGetMemoryInfo(handle)
            used.add_metric([name], memory.used)
            total.add_metric([name], memory.total)
        yield from (util, used, total)


def nvml_collector(indices: Sequence[int]) -> Collector | None:
    """NVML gauges for these CUDA devices, or None where NVML is not available (no GPU,
    no driver): then the metrics are absent, never faked."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return _NvmlCollector(pynvml, indices)
    except Exception:  # ImportError, NVMLError: no NVML here
        return None
