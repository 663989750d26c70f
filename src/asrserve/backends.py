"""The state every node shares, opened for the configured mode.

Embedded (no broker): one SQLite file and in-process events. Distributed
(``broker=redis://...``): jobs, files, batches, keys, the queue (Streams), admission
counts, rate limits and audio blobs in Redis, events over pub/sub, and a leader lease so
that the cluster-wide duties run on one node at a time.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from asrserve.admission import Admission
from asrserve.auth.keys import KeyStore
from asrserve.auth.limits import RateLimiter
from asrserve.batch_api.store import BatchStore
from asrserve.blobs import Blobs
from asrserve.distributed.registry import WorkerRegistry
from asrserve.events import JobEvents
from asrserve.files.store import FileStore
from asrserve.jobs.store import JobStore
from asrserve.queue.base import Queue
from asrserve.settings import Settings

Background = Callable[[], Coroutine[Any, Any, None]]


@dataclass
class Backend:
    store: JobStore
    queue: Queue
    files: FileStore
    batches: BatchStore
    keys: KeyStore
    events: JobEvents
    admission: Admission
    limiter: RateLimiter
    blobs: Blobs
    node: str  # this process's name: its queue consumer and lease holder id
    registry: WorkerRegistry | None = None  # distributed: worker nodes' reports
    ping: Callable[[], Awaitable[object]] | None = None  # distributed: is Redis reachable
    background: list[Background] = field(default_factory=list)  # run for the node's life
    leader: Callable[[Background], Awaitable[None]] | None = None  # None: always the leader
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def aclose(self) -> None:
        for close in reversed(self.closers):
            await close()


def node_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


def open_backend(settings: Settings) -> Backend:
    settings.audio_dir.mkdir(parents=True, exist_ok=True)
    settings.files_dir.mkdir(parents=True, exist_ok=True)
    settings.spool_dir.mkdir(parents=True, exist_ok=True)
    if settings.broker is None:
        return _embedded(settings)
    settings.shared_audio_dir.mkdir(parents=True, exist_ok=True)
    return _distributed(settings, settings.broker)


def _embedded(settings: Settings) -> Backend:
    from asrserve.auth.sqlite import SqliteKeyStore
    from asrserve.batch_api.sqlite import SqliteBatchStore
    from asrserve.files.sqlite import SqliteFileStore
    from asrserve.jobs.sqlite import SqliteJobStore
    from asrserve.queue.sqlite import SqliteQueue
    from asrserve.sqlite import Database

    db = Database(settings.db_path)
    store = SqliteJobStore(db)

    async def close() -> None:
        await store.close()
        db.close()

    return Backend(
        store=store,
        queue=SqliteQueue(db),
        files=SqliteFileStore(db),
        batches=SqliteBatchStore(db),
        keys=SqliteKeyStore(db),
        events=JobEvents(),
        admission=Admission(settings),
        limiter=RateLimiter(),
        blobs=Blobs(settings),
        node=node_name(),
        closers=[close],
    )


def _distributed(settings: Settings, url: str) -> Backend:
    from asrserve.auth.redis import RedisKeyStore
    from asrserve.batch_api.redis import RedisBatchStore
    from asrserve.distributed.admission import RedisAdmission
    from asrserve.distributed.connection import connect
    from asrserve.distributed.events import RedisEvents
    from asrserve.distributed.lease import Leadership
    from asrserve.distributed.limits import RedisRateLimiter
    from asrserve.files.redis import RedisFileStore
    from asrserve.jobs.redis import RedisJobStore
    from asrserve.queue.redis import RedisQueue

    client = connect(url)
    prefix = settings.redis_prefix
    retention = settings.result_retention_s
    node = node_name()
    events = RedisEvents(client, prefix)
    leadership = Leadership(client, f"{prefix}:leader", node, settings.lease_s)
    registry = WorkerRegistry(client, prefix, settings.lease_s)

    async def close() -> None:
        await events.aclose()
        await client.aclose()

    return Backend(
        store=RedisJobStore(client, prefix, retention),
        queue=RedisQueue(client, prefix, node, settings.lease_s),
        files=RedisFileStore(client, prefix),
        batches=RedisBatchStore(client, prefix, retention),
        keys=RedisKeyStore(client, prefix),
        events=events,
        admission=RedisAdmission(settings, client, registry),
        limiter=RedisRateLimiter(client, prefix),
        blobs=Blobs(settings, client),
        node=node,
        registry=registry,
        ping=client.ping,
        background=[events.listen],
        leader=leadership.run,
        closers=[close],
    )
