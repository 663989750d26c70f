"""The state every node shares, opened for the configured mode.

Embedded (no broker): one SQLite file and in-process events. Distributed
(``broker=redis://...``): jobs, files, batches, keys, the queue (Streams), admission
counts, rate limits and audio blobs in Redis, events over pub/sub, the worker registry,
and a leader lease so that the cluster-wide duties run on one node at a time.

Every part is an ABC with its local (SQLite or in-process) and its Redis implementation
beside it; :func:`open_backend` is the one place that chooses them. The embedded parts
that have nothing to share are null objects (a registry of this node alone, a lease always
held, a broker always reachable), so that no caller asks which mode it runs in.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

from asrserve.admission.base import Admission
from asrserve.auth.keys import KeyStore, utc_day
from asrserve.auth.limits import RateLimiter
from asrserve.batch_api.store import BatchStore
from asrserve.blobs.base import Blobs
from asrserve.cluster.base import Lease, WorkerRegistry
from asrserve.events.base import JobEvents
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
    registry: WorkerRegistry  # worker nodes' reports
    lease: Lease  # who runs the cluster-wide duties
    node: str  # this process's name: its queue consumer and lease holder id
    mode: Literal["embedded", "distributed"]
    ping: Callable[[], Awaitable[object]]  # raises when the broker is unreachable
    background: list[Background] = field(default_factory=list)  # run for the node's life
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
    url = settings.broker_url
    if url is None:
        backend = _embedded(settings)
    else:
        settings.shared_audio_dir.mkdir(parents=True, exist_ok=True)
        backend = _distributed(settings, url)
    keys = backend.keys
    backend.admission.key_usage = lambda owner: keys.spent(owner, utc_day())
    return backend


async def _in_process() -> None:
    """The embedded mode's broker ping: there is none, so it is always reachable."""


def _embedded(settings: Settings) -> Backend:
    from asrserve.admission.local import LocalAdmission
    from asrserve.auth.limits import LocalRateLimiter
    from asrserve.auth.sqlite import SqliteKeyStore
    from asrserve.batch_api.sqlite import SqliteBatchStore
    from asrserve.blobs.local import LocalBlobs
    from asrserve.cluster.local import LocalLease, LocalRegistry
    from asrserve.drivers.sqlite import Database
    from asrserve.events.local import LocalEvents
    from asrserve.files.sqlite import SqliteFileStore
    from asrserve.jobs.sqlite import SqliteJobStore
    from asrserve.queue.sqlite import SqliteQueue

    db = Database(settings.db_path)
    store = SqliteJobStore(db)
    registry = LocalRegistry()

    async def close() -> None:
        await store.close()
        db.close()

    return Backend(
        store=store,
        queue=SqliteQueue(db),
        files=SqliteFileStore(db),
        batches=SqliteBatchStore(db),
        keys=SqliteKeyStore(db),
        events=LocalEvents(),
        admission=LocalAdmission(settings, registry),
        limiter=LocalRateLimiter(),
        blobs=LocalBlobs(),
        registry=registry,
        lease=LocalLease(),
        node=node_name(),
        mode="embedded",
        ping=_in_process,
        closers=[close],
    )


def _distributed(settings: Settings, url: str) -> Backend:
    from asrserve.admission.redis import RedisAdmission
    from asrserve.auth.limits import RedisRateLimiter
    from asrserve.auth.redis import RedisKeyStore
    from asrserve.batch_api.redis import RedisBatchStore
    from asrserve.blobs.redis import RedisBlobs
    from asrserve.cluster.redis import RedisLease, RedisRegistry
    from asrserve.drivers.redis import connect
    from asrserve.events.redis import RedisEvents
    from asrserve.files.redis import RedisFileStore
    from asrserve.jobs.redis import RedisJobStore
    from asrserve.queue.redis import RedisQueue

    client = connect(url)
    prefix = settings.redis_prefix
    retention = settings.result_retention_s
    node = node_name()
    events = RedisEvents(client, prefix)
    registry = RedisRegistry(client, prefix, settings.lease_s)

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
        admission=RedisAdmission(settings, client, prefix, registry),
        limiter=RedisRateLimiter(client, prefix),
        blobs=RedisBlobs(
            settings,
            client,
            shared_audio_dir=settings.shared_audio_dir,
            audio_dir=settings.audio_dir,
        ),
        registry=registry,
        lease=RedisLease(client, f"{prefix}:leader", node, settings.lease_s),
        node=node,
        mode="distributed",
        ping=client.ping,
        background=[events.listen],
        closers=[close],
    )
