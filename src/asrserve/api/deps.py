"""What routes reach through ``request.app.state``: one context, wired by ``api/app.py``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from asrserve.api.responses import Renders
from asrserve.api.uploads import UploadGate
from asrserve.api.waits import WaitGate
from asrserve.auth.principal import OPEN, Principal
from asrserve.batcher.residency import Residency
from asrserve.engine.catalog import Catalog
from asrserve.live.sessions import Live, NoLive
from asrserve.metrics import Metrics
from asrserve.service.batches import Batches
from asrserve.service.files import Files
from asrserve.service.jobs import Service


@dataclass
class ApiContext:
    service: Service
    files: Files
    batches: Batches
    metrics: Metrics = field(default_factory=Metrics)
    uploads: UploadGate = field(default_factory=UploadGate)  # uploads being received
    waits: WaitGate = field(default_factory=WaitGate)  # event streams and long polls open
    renders: Renders = field(default_factory=Renders)  # transcripts rendered, off the loop
    catalog: Catalog | None = None  # the served models, set once they are loaded
    scheduler_view: Callable[[], Awaitable[dict[str, Any]]] = field(default=lambda: _empty())
    # raises when the broker is unreachable (embedded: never)
    broker_ping: Callable[[], Awaitable[object]] = field(default=lambda: _empty())
    live: Live = field(default_factory=NoLive)  # live sessions, on a node that runs a model
    # which models are loaded, and loading/unloading them (embedded mode only: None on a
    # distributed node, whose models live on the worker nodes)
    residency: Residency | None = None
    # who an Authorization header names (AccessControl.principal; the open caller by default)
    authenticate: Callable[[str], Awaitable[Principal]] = field(default=lambda _: _open())

    @property
    def ready(self) -> bool:
        return self.catalog is not None


async def _empty() -> dict[str, Any]:
    return {}


async def _open() -> Principal:
    return OPEN


def context(request: Request) -> ApiContext:
    ctx = request.app.state.context
    assert isinstance(ctx, ApiContext)
    return ctx
