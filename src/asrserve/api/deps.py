"""What routes reach through ``request.app.state``: one context, wired by ``api/app.py``."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from fastapi import Request

from asrserve.api.uploads import UploadGate
from asrserve.api.waits import WaitGate
from asrserve.auth.principal import OPEN, Principal
from asrserve.batch_api.store import BatchStore
from asrserve.engine.catalog import Catalog
from asrserve.files.store import FileStore
from asrserve.live.sessions import Live, NoLive
from asrserve.metrics import Metrics
from asrserve.service.jobs import Service

P = ParamSpec("P")
T = TypeVar("T")
SCAN_THREADS = 2


@dataclass
class ApiContext:
    service: Service
    files: FileStore
    batches: BatchStore
    metrics: Metrics = field(default_factory=Metrics)
    uploads: UploadGate = field(default_factory=UploadGate)  # uploads being received
    waits: WaitGate = field(default_factory=WaitGate)  # event streams and long polls open
    catalog: Catalog | None = None  # the served models, set once they are loaded
    scheduler_view: Callable[[], Awaitable[dict[str, Any]]] = field(default=lambda: _empty())
    # raises when the broker is unreachable (embedded: never)
    broker_ping: Callable[[], Awaitable[object]] = field(default=lambda: _empty())
    live: Live = field(default_factory=NoLive)  # live sessions, on a node that runs a model
    # who an Authorization header names (AccessControl.principal; the open caller by default)
    authenticate: Callable[[str], Awaitable[Principal]] = field(default=lambda _: _open())

    # blocking reads of whole uploaded files (a batch file's lines): threads of their own, so
    # that a large file never holds the threads the stores' calls run on
    scans: ThreadPoolExecutor = field(default_factory=lambda: _scan_threads())

    async def scan(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.scans, functools.partial(fn, *args, **kwargs))

    @property
    def ready(self) -> bool:
        return self.catalog is not None


def _scan_threads() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=SCAN_THREADS, thread_name_prefix="asrserve-scan")


async def _empty() -> dict[str, Any]:
    return {}


async def _open() -> Principal:
    return OPEN


def context(request: Request) -> ApiContext:
    ctx = request.app.state.context
    assert isinstance(ctx, ApiContext)
    return ctx
