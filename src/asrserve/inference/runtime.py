"""Inference on this node: model replicas, the scheduler over them, and the consumer that
claims jobs from the queue. Used by the embedded server, by ``serve --inference`` and by
``asrserve worker`` (a worker node without HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadpoolctl import threadpool_limits

from asrserve.audio.allocations import cap_ffmpeg_allocations
from asrserve.backends.backend import Backend
from asrserve.batcher.device import Device
from asrserve.batcher.policies.base import foreground_reserve
from asrserve.batcher.recording import TrafficRecorder
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.batcher.stats import BatchRecord
from asrserve.blobs.references import drop_references
from asrserve.cluster.base import WorkerRegistry
from asrserve.engine.base import Engine, ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.engine.registry import engine_choice, engine_kind
from asrserve.errors import StoreUnavailable
from asrserve.inference.calibration import calibrate
from asrserve.inference.consumer import Consumer, Lane
from asrserve.inference.cpu_split import cpu_seconds
from asrserve.inference.device_meter import DeviceMeter
from asrserve.inference.preprocess_stats import PreprocessStats, bound
from asrserve.inference.priority_pool import PriorityPool
from asrserve.jobs.models import Job
from asrserve.metrics import Metrics
from asrserve.settings import Settings
from asrserve.speakers.models import installed
from asrserve.vocabulary import Priority
from asrserve.waiting import cancel_all

log = logging.getLogger(__name__)

EngineFactory = Callable[[Settings], Sequence[Mapping[str, Engine]]]
"""Per device: a replica of every served model, by id (the default model's first)."""
TRIM_PERIOD_S = 3600.0
STOP_BOUND_S = 3.0  # each step of stopping that cancels tasks waits this long at most


@dataclass
class Inference:
    """Everything inference runs on this node, so it can be stopped in order."""

    settings: Settings
    catalog: Catalog
    scheduler: Scheduler
    consumer: Consumer
    executors: list[PriorityPool]
    preprocessing: PreprocessStats
    meter: DeviceMeter  # each key's device seconds, to its daily usage
    calibration: str = "off"  # how the cost curves were seeded: stored, measured, off, unneeded
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def view(self) -> dict[str, Any]:
        settings, scheduler = self.settings, self.scheduler
        return {
            "engine": engine_choice(settings).engine,
            "engine_choice": engine_choice(settings).view(),
            "policy": scheduler.policy.name,
            "max_batch_size": settings.max_batch_size,
            "max_wait_ms": settings.max_wait_ms,
            "devices": [d.name for d in scheduler.devices],
            "layout": engine_kind(settings).layout(settings).as_dict(),
            "encoder_window": settings.encoder_window.value,
            "encoder_windows_s": list(settings.windows),
            "calibration": self.calibration,
            "cost_curves": scheduler.curves.view(),
            "cpu_seconds": cpu_seconds(),
            "pending_chunks": scheduler.pending_count(),
            "pending_by_window": scheduler.pending_by_window(),
            "models": self._models(),
            "speaker_model": scheduler.devices[0].speakers.name,
            "jobs_in_flight": self.consumer.in_flight,
            **scheduler.stats.snapshot(),
            **self._capacities(),
        }

    def _capacities(self) -> dict[str, Any]:
        """What the online preprocessing pool and the devices can each do (audio s per s,
        every thread or device busy), and which of the two is the smaller: the node's bound."""
        preprocessing = self.preprocessing.snapshot()
        devices = self.scheduler.stats.throughput()
        return {
            "preprocessing": preprocessing,
            "devices_capacity": None if devices is None else round(devices, 3),
            "bound": bound(self.preprocessing.capacity(), devices),
        }

    def _models(self) -> list[dict[str, Any]]:
        """Each served model: its weights' size (about what each replica holds in memory:
        one replica per device) and the devices where they are loaded now."""
        devices = self.scheduler.devices
        return [
            {
                "id": model.id,
                "multilingual": model.multilingual,
                "capabilities": devices[0].engines[model.id].capabilities.view(),
                "weights_bytes": model.weights_bytes,
                "loaded_on": [d.name for d in devices if d.engines[model.id].loaded],
                "pending_chunks": self.scheduler.pending_count(model=model.id),
            }
            for model in self.catalog
        ]

    async def stop(self) -> None:
        """Two phases: stop claiming; drain in-flight jobs for the grace period, then cancel
        what is left (it goes back to the queue)."""
        self.consumer.stop_claiming()
        await cancel_all([self.tasks["consumer"]], STOP_BOUND_S)
        await self.consumer.drain(self.settings.shutdown_grace_s)
        left = await cancel_all(self.tasks.values(), STOP_BOUND_S)
        await self.meter.flush()
        if left:
            log.error("stopping inference: %s did not end", ", ".join(t.get_name() for t in left))
        self.scheduler.close()
        for executor in self.executors:
            executor.shutdown(wait=False, cancel_futures=True)


async def start_inference(
    settings: Settings,
    backend: Backend,
    engine_factory: EngineFactory,
    metrics: Metrics,
    recorder: TrafficRecorder | None,
) -> Inference:
    cap_ffmpeg_allocations()  # this process decodes jobs' audio (audio/allocations.py)
    replicas = await asyncio.to_thread(engine_factory, settings)
    scheduler = _scheduler(settings, replicas, metrics, recorder)
    meter = DeviceMeter(backend.keys)
    scheduler.shares.listeners.append(meter.charged)
    calibration = await _calibrate(settings, scheduler)
    catalog = Catalog.of(
        [
            ModelInfo(
                engine.model_id,
                engine.multilingual,
                settings.beam_size,
                engine.weights_bytes,
                engine.keep_alive,
            )
            for engine in replicas[0].values()
        ]
    )
    threads = settings.preprocess_threads or os.cpu_count() or 1
    preprocess = PriorityPool(threads, "preprocess")
    preprocessing = PreprocessStats(threads)
    offline = PriorityPool(1, "preprocess-batch")
    ahead = settings.max_batch_size * len(replicas) if settings.distributed else None
    lanes = [
        Lane(
            (Priority.INTERACTIVE, Priority.ASYNC),
            settings.prefetch_jobs,
            preprocess,
            ahead=ahead,
            stats=preprocessing,
        ),
        Lane(
            (Priority.OFFLINE,),
            settings.batch_api_prefetch_jobs,
            offline,
            ahead=ahead,
            stats=PreprocessStats(1),
        ),
    ]

    async def on_finished(job: Job) -> None:
        metrics.job_finished(job)
        await backend.admission.finished(job)
        await drop_references(backend.blobs, job.known_speakers)  # done with: they go now
        if settings.audio_retention_s == 0 and job.audio_path and job.owns_audio:
            await backend.blobs.delete(job.audio_path)

    consumer = Consumer(settings, backend, scheduler, lanes, on_finished)
    metrics.watch_in_flight(consumer.held)
    recovered = await consumer.durably("recover", backend.queue.recover)
    await consumer.durably("requeue", functools.partial(requeue_lost, backend))
    inference = Inference(
        settings,
        catalog,
        scheduler,
        consumer,
        [preprocess, offline],
        preprocessing,
        meter,
        calibration,
    )
    inference.tasks = {
        "scheduler": asyncio.create_task(scheduler.run(), name="scheduler"),
        "consumer": asyncio.create_task(consumer.run(), name="consumer"),
        "heartbeat": asyncio.create_task(consumer.heartbeat(), name="heartbeat"),
        "report": asyncio.create_task(
            _report(settings, backend.registry, backend.node, inference), name="report"
        ),
    }
    choice = engine_choice(settings)
    log.info(
        "inference ready: engine %s (%s), %d device(s) (%s), model(s) %s, policy %s, %d claimed"
        " job(s) to recover",
        choice.engine,
        choice.reason,
        len(replicas),
        engine_kind(settings).layout(settings).source,
        ", ".join(catalog.ids),
        settings.batch_policy,
        recovered,
    )
    return inference


async def _calibrate(settings: Settings, scheduler: Scheduler) -> str:
    """Seed the scheduler's cost curves (``inference/calibration.py``) for this setup: the
    engine, device, compute type and layout, and each model's weights and windows."""
    kind, engines = engine_kind(settings), scheduler.devices[0].engines
    setup = {
        "engine": engine_choice(settings).engine,
        "device": f"{kind.resolve_device(settings)}:{settings.device_index}",
        "compute_type": settings.compute_type,
        "layout": kind.layout(settings).as_dict(),
        "models": {model: engine.weights_bytes for model, engine in engines.items()},
    }
    windows = {
        model: engine.capabilities.windows(settings.windows) for model, engine in engines.items()
    }
    folder = settings.data_dir / "calibration"
    return await calibrate(
        scheduler, settings.calibration, folder, setup, windows, settings.beam_size
    )


async def _report(
    settings: Settings, registry: WorkerRegistry, node: str, inference: Inference
) -> None:
    """Tell the API nodes what this worker node is doing, a third of a lease apart."""
    try:
        while True:
            view = {**inference.view(), "throughput": inference.scheduler.stats.throughput()}
            try:
                await registry.report(node, view)
            except StoreUnavailable as exc:
                log.warning("worker report failed (%s)", exc)
            await asyncio.sleep(settings.lease_s / 3)  # a report timer: no event to wait on
    finally:
        with contextlib.suppress(StoreUnavailable):
            await asyncio.shield(registry.forget(node))


def _scheduler(
    settings: Settings,
    replicas: Sequence[Mapping[str, Engine]],
    metrics: Metrics,
    recorder: TrafficRecorder | None,
) -> Scheduler:
    """One scheduler over every replica, reporting each batch to metrics and the recorder."""
    engine = engine_kind(settings)
    names = engine.device_names(settings, len(replicas))
    speakers = installed()  # one for all devices: it holds no state between calls
    # numpy's own work on a device (the speaker model's passes) takes the device's share of
    # the cores, as its engine does: OpenBLAS's default (every core, per call) made two
    # devices' passes fight for the cores (a diarized answer took 2.2x a plain one's time
    # instead of 1.6x, docs/benchmarks.md)
    threadpool_limits(engine.layout(settings).threads, user_api="blas")
    devices = [
        Device(name, dict(models), speakers) for name, models in zip(names, replicas, strict=False)
    ]
    config = SchedulerConfig(
        policy=settings.batch_policy,
        max_batch_size=settings.max_batch_size,
        max_wait=settings.max_wait_ms / 1000,
        max_age=settings.max_queue_age_s,
        offline_priority=Priority.OFFLINE,
        offline_holdoff=settings.offline_holdoff_ms / 1000,
        run_timeout_floor=settings.run_timeout_floor_s,
        model_idle=settings.model_idle_s,
        keep_alive={
            model: engine.keep_alive
            for model, engine in replicas[0].items()
            if engine.keep_alive is not None
        },
        fill_share=settings.fill_wait_share,
        ride_share=settings.offline_ride_share,
        live_below=Priority.INTERACTIVE,
        live_batch_s=settings.live_batch_s,
        background_from=Priority.ASYNC,
        background_batch_s=settings.background_batch_s,
        foreground_reserve=foreground_reserve(len(devices)),
    )

    def on_batch(record: BatchRecord) -> None:
        metrics.observe_batch(record)
        if recorder is not None:
            recorder.batch(record)

    scheduler = Scheduler(devices, config, on_batch=on_batch)
    metrics.watch_scheduler(scheduler.stats)
    if engine.resolve_device(settings) == "cuda":
        metrics.watch_gpus(settings.device_index)
    return scheduler


async def requeue_lost(backend: Backend) -> int:
    """Queue every unfinished job again (puts are idempotent: what is queued or claimed
    stays as it is), so that a job whose enqueue was lost (a crash, or Redis gone between
    storing the job and queueing it) still runs. How many unfinished jobs there were."""
    unfinished = await backend.store.unfinished()
    for priority in Priority:
        ids = [job.id for job in unfinished if job.priority is priority]
        if ids:
            await backend.queue.put_many(ids, priority)
    return len(unfinished)


async def sweep_audio(settings: Settings, backend: Backend) -> None:
    """Remove uploaded audio once its job has been finished for ``audio_retention_s``, and
    what the store keeps of jobs older than the longest a job can live plus its retention."""
    period = min(max(settings.audio_retention_s / 4, 1.0), 60.0)
    oldest = settings.batch_api_window_s + settings.result_retention_s
    next_trim = time.monotonic()
    while True:
        cutoff = time.time() - settings.audio_retention_s
        for job in await backend.store.audio_expired(cutoff):
            await backend.blobs.delete(job.audio_path)
            await drop_references(backend.blobs, job.known_speakers)
            await backend.store.forget_audio(job.id)
        if time.monotonic() >= next_trim:  # hourly: these scan indexes
            await backend.store.trim(time.time() - oldest)
            await requeue_lost(backend)
            next_trim = time.monotonic() + TRIM_PERIOD_S
        await asyncio.sleep(period)  # a periodic timer, not a wait for an event
