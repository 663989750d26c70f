"""Wiring: settings → store, queue, engines, scheduler, worker, webhooks → one FastAPI app.

One lifespan owns every background task. Shutdown is two-phase: stop claiming new jobs,
let in-flight jobs drain for ``shutdown_grace_s``, then cancel what is left (those jobs
stay queued and run again on the next start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from fastapi import FastAPI

from asrserve.admission import Admission
from asrserve.api import audio_routes, batch_routes, file_routes, health_routes, job_routes
from asrserve.api.access import AccessControl
from asrserve.api.deps import ApiContext
from asrserve.api.errors import install_error_handlers
from asrserve.api.forms import ModelInfo
from asrserve.api.schemas import job_view
from asrserve.api.uploads import UploadGate, UploadLimits
from asrserve.auth.sqlite import SqliteKeyStore
from asrserve.batches.models import Batch
from asrserve.batches.runner import BatchRunner
from asrserve.batches.sqlite import SqliteBatchStore
from asrserve.batching.scheduler import Device, Scheduler, SchedulerConfig
from asrserve.batching.stats import BatchRecord
from asrserve.dashboard import routes as dashboard_routes
from asrserve.engine.base import Engine
from asrserve.engine.whisper import (
    EngineConfig,
    FasterWhisperEngine,
    bundled_model_path,
    check_model_dir,
)
from asrserve.events import JobEvents
from asrserve.files.sqlite import SqliteFileStore
from asrserve.jobs.models import Job, Priority
from asrserve.jobs.sqlite import SqliteJobStore
from asrserve.queue.sqlite import SqliteQueue
from asrserve.service import Service
from asrserve.settings import Settings
from asrserve.sqlite import Database
from asrserve.tune.recorder import TrafficRecorder
from asrserve.webhooks import BatchWebhooks, JobWebhooks, WebhookSender
from asrserve.worker import Lane, Worker

log = logging.getLogger(__name__)

EngineFactory = Callable[[Settings], Sequence[Engine]]


def model_path(settings: Settings) -> Path:
    return check_model_dir(settings.model or bundled_model_path())


def resolve_device(settings: Settings) -> str:
    if settings.device != "auto":
        return settings.device
    import ctranslate2

    return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"


def load_engines(settings: Settings) -> list[Engine]:
    """One replica per CUDA device index, or ``cpu_workers`` replicas sharing the cores."""
    path = model_path(settings)
    model_id = settings.model_id or ("tiny.en" if settings.model is None else path.name)
    device = resolve_device(settings)
    compute = settings.compute_type
    if compute == "default":
        compute = "float16" if device == "cuda" else "int8"
    if device == "cuda":
        slots = [(index, 0) for index in settings.device_index]
    else:
        threads = settings.cpu_threads or max(1, (os.cpu_count() or 1) // settings.cpu_workers)
        slots = [(0, threads)] * settings.cpu_workers
    return [
        FasterWhisperEngine(EngineConfig(path, model_id, device, index, compute, threads))
        for index, threads in slots
    ]


@dataclass
class Runtime:
    """Everything the lifespan starts, so it can be stopped in order."""

    settings: Settings
    engines: Sequence[Engine]
    scheduler: Scheduler
    worker: Worker
    webhooks: WebhookSender
    executors: list[ThreadPoolExecutor]
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)


def create_app(settings: Settings, engine_factory: EngineFactory = load_engines) -> FastAPI:
    settings.audio_dir.mkdir(parents=True, exist_ok=True)
    settings.files_dir.mkdir(parents=True, exist_ok=True)
    db = Database(settings.db_path)
    store = SqliteJobStore(db)
    queue = SqliteQueue(db)
    events = JobEvents()
    recorder = TrafficRecorder.from_settings(settings)
    keys = SqliteKeyStore(db)
    admission = Admission(settings)
    context = ApiContext(
        service=Service(settings, store, queue, events, keys, admission, recorder),
        files=SqliteFileStore(db),
        batches=SqliteBatchStore(db),
        uploads=UploadGate(UploadLimits.from_settings(settings)),
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        runtime: Runtime | None = None
        loader = asyncio.create_task(_start(settings, engine_factory, context, events))
        try:
            runtime = await loader
            yield
        finally:
            loader.cancel()
            if runtime is not None:
                await _stop(runtime)
            await store.close()
            db.close()

    app = FastAPI(
        title="asrserve",
        version="0.1.0",
        lifespan=lifespan,
        description="Whisper transcription built around a dynamic batching scheduler.",
    )
    app.state.context = context
    app.middleware("http")(AccessControl(settings, keys))
    app.middleware("http")(context.metrics.middleware)  # outermost: counts 401s and 429s too
    install_error_handlers(app)
    for module in (health_routes, audio_routes, job_routes, file_routes, batch_routes):
        app.include_router(module.router)
    app.include_router(dashboard_routes.router)
    return app


async def _start(
    settings: Settings, engine_factory: EngineFactory, context: ApiContext, events: JobEvents
) -> Runtime:
    service = context.service
    engines = await asyncio.to_thread(engine_factory, settings)
    scheduler = _scheduler(settings, engines, context)
    model = ModelInfo(
        id=engines[0].model_id,
        multilingual=engines[0].multilingual,
        default_beam_size=settings.beam_size,
    )
    preprocess = ThreadPoolExecutor(
        settings.preprocess_threads or os.cpu_count() or 1, thread_name_prefix="preprocess"
    )
    offline = ThreadPoolExecutor(1, thread_name_prefix="preprocess-batch")
    lanes = [
        Lane((Priority.INTERACTIVE, Priority.ASYNC), settings.prefetch_jobs, preprocess),
        Lane((Priority.BATCH,), settings.batch_prefetch_jobs, offline),
    ]
    webhooks = WebhookSender(
        settings, [JobWebhooks(service.store, job_view), BatchWebhooks(context.batches)]
    )

    def on_batch_end(batch: Batch) -> None:
        if batch.callback_url:
            webhooks.kick()

    runner = BatchRunner(service, context.batches, context.files, model, on_batch_end)

    def on_finished(job: Job) -> None:
        context.metrics.job_finished(job)
        service.admission.finished(job)
        if job.callback_url:
            webhooks.kick()
        if job.batch_id:
            runner.kick()
        if settings.audio_retention_s == 0 and job.audio_path and job.owns_audio:
            Path(job.audio_path).unlink(missing_ok=True)

    worker = Worker(
        settings, service.store, service.queue, scheduler, events, engines[0], lanes, on_finished
    )
    recovered = await service.queue.recover()
    unfinished = await service.store.unfinished()
    for job in unfinished:
        await service.queue.put(job.id, job.priority)
    service.admission.reset(unfinished)
    service.admission.throughput = scheduler.stats.throughput
    runtime = Runtime(settings, engines, scheduler, worker, webhooks, [preprocess, offline])
    runtime.tasks = {
        "scheduler": asyncio.create_task(scheduler.run(), name="scheduler"),
        "worker": asyncio.create_task(worker.run(), name="worker"),
        "batches": asyncio.create_task(runner.run(), name="batches"),
        "webhooks": asyncio.create_task(webhooks.run(), name="webhooks"),
        "retention": asyncio.create_task(_sweep_audio(settings, service), name="retention"),
    }
    context.scheduler_view = lambda: {
        **_scheduler_view(settings, scheduler, worker),
        "admission": service.admission.view(),
    }
    context.kick_batches = runner.kick
    context.model = model
    log.info(
        "ready: %d device(s), policy %s, %d claimed job(s) recovered",
        len(engines),
        settings.batch_policy.value,
        recovered,
    )
    return runtime


def _scheduler(settings: Settings, engines: Sequence[Engine], context: ApiContext) -> Scheduler:
    """One scheduler over every replica, reporting each batch to metrics and the recorder."""
    config = SchedulerConfig(
        policy=settings.batch_policy,
        max_batch_size=settings.max_batch_size,
        max_wait=settings.max_wait_ms / 1000,
        max_age=settings.max_queue_age_s,
        offline_priority=Priority.BATCH,
        offline_holdoff=settings.offline_holdoff_ms / 1000,
    )
    metrics = context.metrics
    kind = resolve_device(settings)
    indices = settings.device_index if kind == "cuda" else range(len(engines))
    devices = [Device(f"{kind}:{i}", engine) for i, engine in zip(indices, engines, strict=False)]
    recorder = context.service.recorder

    def on_batch(record: BatchRecord) -> None:
        metrics.observe_batch(record)
        if recorder is not None:
            recorder.batch(record)

    scheduler = Scheduler(devices, config, on_batch=on_batch)
    metrics.watch_scheduler(scheduler.stats)
    if kind == "cuda":
        metrics.watch_gpus(settings.device_index)
    return scheduler


async def _stop(runtime: Runtime) -> None:
    tasks = runtime.tasks
    tasks["worker"].cancel()  # phase 1: stop claiming
    with contextlib.suppress(asyncio.CancelledError):
        await tasks["worker"]
    await runtime.worker.drain(runtime.settings.shutdown_grace_s)  # phase 2: drain, cancel
    for name in ("scheduler", "batches", "webhooks", "retention"):
        tasks[name].cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)
    await runtime.webhooks.aclose()
    runtime.scheduler.close()
    for executor in runtime.executors:
        executor.shutdown(wait=False, cancel_futures=True)


async def _sweep_audio(settings: Settings, service: Service) -> None:
    """Remove uploaded audio once its job has been finished for ``audio_retention_s``."""
    period = min(max(settings.audio_retention_s / 4, 1.0), 60.0)
    while True:
        cutoff = time.time() - settings.audio_retention_s
        for job in await service.store.audio_expired(cutoff):
            await asyncio.to_thread(Path(job.audio_path).unlink, missing_ok=True)
            await service.store.forget_audio(job.id)
        await asyncio.sleep(period)  # a periodic timer, not a wait for an event


def _scheduler_view(settings: Settings, scheduler: Scheduler, worker: Worker) -> dict[str, object]:
    return {
        "policy": settings.batch_policy.value,
        "max_batch_size": settings.max_batch_size,
        "max_wait_ms": settings.max_wait_ms,
        "devices": [d.name for d in scheduler.devices],
        "encoder_window": settings.encoder_window.value,
        "encoder_windows_s": list(settings.windows),
        "pending_chunks": scheduler.pending_count(),
        "pending_by_window": scheduler.pending_by_window(),
        "jobs_in_flight": worker.in_flight,
        **scheduler.stats.snapshot(),
    }
