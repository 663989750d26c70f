"""Wiring: settings → backend (SQLite or Redis) → inference, duties → one FastAPI app.

One lifespan owns every background task. Inference runs here in the embedded mode and on
``serve --inference``; a distributed API node without it only validates, stores, enqueues
and waits. The cluster-wide duties (Batch API runner, webhooks, audio retention) run
here in the embedded mode, and on whichever distributed API node holds the leader lease.
Shutdown is two-phase: stop claiming new jobs, let in-flight jobs drain for
``shutdown_grace_s``, then cancel what is left (those jobs run again elsewhere or later).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from asrserve.admission import Admission
from asrserve.api import (
    asr_webservice_routes,
    audio_routes,
    batch_routes,
    file_routes,
    health_routes,
    job_routes,
    model_routes,
    realtime,
    webhook_routes,
)
from asrserve.api.access import AccessControl
from asrserve.api.dashboard import routes as dashboard_routes
from asrserve.api.deps import ApiContext
from asrserve.api.errors import install_error_handlers
from asrserve.api.hosts import HostCheck
from asrserve.api.json_body import install as install_body_limit
from asrserve.api.request_metrics import request_metrics
from asrserve.api.schemas import job_view
from asrserve.api.uploads import UploadGate, UploadLimits
from asrserve.api.waits import WaitGate
from asrserve.backends.backend import Backend, open_backend
from asrserve.batch_api.models import Batch
from asrserve.batcher.recording import TrafficRecorder
from asrserve.cluster.base import supervised
from asrserve.cluster.merge import merge
from asrserve.engine.catalog import Catalog
from asrserve.engine.registry import load_engines, served_models
from asrserve.events import Finished
from asrserve.inference.runtime import (
    EngineFactory,
    Inference,
    start_inference,
    sweep_audio,
)
from asrserve.live.decoder import LiveDecoder
from asrserve.live.sessions import LiveSessions
from asrserve.service.batch_runner import BatchRunner
from asrserve.service.batches import Batches
from asrserve.service.files import Files
from asrserve.service.jobs import Service
from asrserve.service.webhooks import BatchWebhooks, JobWebhooks, WebhookSender, WebhookSource
from asrserve.settings import Settings
from asrserve.vocabulary import Priority
from asrserve.wyoming.server import WyomingServer, start_wyoming

log = logging.getLogger(__name__)

__all__ = ["create_app"]


def create_app(
    settings: Settings, engine_factory: EngineFactory = load_engines, *, inference: bool = True
) -> FastAPI:
    """``inference=False`` (distributed only): an API node that runs no model."""
    if not inference and settings.broker is None:
        raise ValueError("an API node without inference needs a broker")
    backend = open_backend(settings)
    recorder = TrafficRecorder.from_settings(settings)
    service = Service(settings, backend, recorder)
    files = Files(
        settings,
        backend.files,
        files_dir=settings.files_dir,
        max_job_upload_bytes=settings.max_job_upload_bytes,
    )
    context = ApiContext(
        service=service,
        files=files,
        batches=Batches(service, files, backend.batches),
        uploads=UploadGate(UploadLimits.from_settings(settings)),
        waits=WaitGate(settings.max_waits_per_key),
        broker_ping=backend.ping,
    )

    @contextlib.asynccontextmanager
    async def lifespan(started: FastAPI) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(run(), name=run.__name__) for run in backend.background]
        local: Inference | None = None
        wyoming: WyomingServer | None = None
        try:
            if inference:
                local = await start_inference(
                    settings, backend, engine_factory, context.metrics, recorder
                )
            catalog = local.catalog if local is not None else served_models(settings)
            tasks.append(asyncio.create_task(_lead(settings, backend, context, catalog)))
            context.scheduler_view = _view(backend, local)
            if local is not None:
                context.live = LiveSessions(LiveDecoder(local.scheduler, settings), settings)
            if local is not None and not settings.distributed:
                context.residency = local.scheduler.residency
            context.catalog = catalog
            # Home Assistant's protocol beside HTTP, when its port is set
            wyoming = started.state.wyoming = await start_wyoming(settings, service, catalog)
            yield
        finally:
            if wyoming is not None:  # its utterances answered while inference still runs
                await wyoming.stop(settings.shutdown_grace_s)
            if local is not None:
                await local.stop()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            files.close()
            await service.probes.close()
            await backend.aclose()

    app = FastAPI(
        title="asrserve",
        version="0.1.0",
        lifespan=lifespan,
        description="Whisper transcription built around a dynamic batching scheduler.",
    )
    app.state.context = context
    context.metrics.watch_uploads(lambda: context.uploads.active)
    install_body_limit(app, settings.max_json_body_bytes)  # innermost: after keys
    auth_enabled = settings.auth_enabled
    access = AccessControl(settings, backend.keys, backend.limiter, auth_enabled=auth_enabled)
    context.authenticate = access.principal
    app.middleware("http")(access)
    # before keys: 421 for a rebound name
    app.add_middleware(HostCheck, settings=settings, host=settings.host, auth_enabled=auth_enabled)
    app.middleware("http")(request_metrics(context.metrics))  # outermost: counts 401s and 429s too
    install_error_handlers(app)
    routers = (
        health_routes,
        audio_routes,
        model_routes,
        job_routes,
        file_routes,
        batch_routes,
        webhook_routes,
    )
    for module in (*routers, asr_webservice_routes, realtime):
        app.include_router(module.router)
    app.include_router(dashboard_routes.router)
    return app


async def _lead(
    settings: Settings, backend: Backend, context: ApiContext, catalog: Catalog
) -> None:
    """The duties one node runs for the whole deployment: here (embedded), or wherever the
    leader lease is held (distributed)."""
    service = context.service
    sources: list[WebhookSource] = [
        JobWebhooks(backend.store, job_view),
        BatchWebhooks(backend.batches),
    ]
    webhooks = WebhookSender(settings, sources, service.signer)

    def on_batch_api_done(batch: Batch) -> None:
        backend.events.batch_ended(batch.id)
        if batch.callback_url:
            webhooks.kick()

    runner = BatchRunner(service, backend.batches, context.files, catalog, on_batch_api_done)

    def on_finish(notice: Finished) -> None:
        if notice.callback:
            webhooks.kick()
        if notice.batch_id:
            runner.kick()

    def on_resync() -> None:
        webhooks.kick()
        runner.kick()

    backend.events.on_finish(on_finish)
    backend.events.on_batch_api_changed(runner.kick)
    backend.events.on_resync(on_resync)

    async def duties() -> None:
        await service.admission.reset(await backend.store.unfinished())
        async with asyncio.TaskGroup() as group:  # each duty restarts alone if it fails
            group.create_task(supervised("batches", runner.run), name="batches")
            group.create_task(supervised("webhooks", webhooks.run), name="webhooks")
            retention = functools.partial(sweep_audio, settings, backend)
            group.create_task(supervised("retention", retention), name="retention")

    try:
        await backend.lease.run(duties)
    finally:
        await webhooks.aclose()


def _view(backend: Backend, local: Inference | None) -> Any:
    admission: Admission = backend.admission
    if local is not None:
        admission.throughput = local.scheduler.stats.throughput
        admission.device_cost = local.scheduler.stats.device_cost

    async def view() -> dict[str, Any]:
        depth = await backend.queue.depth()
        workers = await backend.registry.alive()
        return {
            **(local.view() if local is not None else merge(workers)),
            "workers": workers,
            "mode": backend.mode,
            "node": backend.node,
            "queue_depth": {p.name.lower(): depth[p] for p in Priority},
            "admission": await admission.view(),
        }

    return view
