"""Webhook delivery: POST a finished job or batch to its callback URL, with retries.

The owner's stored row says whether a delivery is owed (``webhook_status = pending``), so
deliveries survive a restart. Failed attempts back off exponentially; every attempt is
recorded. Sources (jobs, batches) say what is owed; the sender only delivers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from asrserve import outbound
from asrserve.batches.models import Batch
from asrserve.batches.store import BatchStore
from asrserve.jobs.models import Job, WebhookStatus
from asrserve.jobs.store import JobStore
from asrserve.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Owed:
    key: str  # unique across sources: a job or batch id
    url: str
    event: str  # sent as X-Asrserve-Event, e.g. job.succeeded, batch.completed
    body: dict[str, Any]
    attempts: int
    record: Callable[[WebhookStatus, str | None], Awaitable[object]]


class WebhookSource(Protocol):
    async def owed(self) -> list[Owed]: ...


class JobWebhooks:
    def __init__(self, store: JobStore, render: Callable[[Job], dict[str, Any]]) -> None:
        self._store = store
        self._render = render

    async def owed(self) -> list[Owed]:
        return [self._owed(job) for job in await self._store.webhooks_pending() if job.callback_url]

    def _owed(self, job: Job) -> Owed:
        assert job.callback_url is not None

        async def record(status: WebhookStatus, error: str | None) -> object:
            return await self._store.record_webhook(job.id, status, error)

        event = f"job.{job.status.value}"
        return Owed(
            job.id, job.callback_url, event, self._render(job), job.webhook_attempts, record
        )


class BatchWebhooks:
    def __init__(self, store: BatchStore) -> None:
        self._store = store

    async def owed(self) -> list[Owed]:
        pending = await self._store.webhooks_pending()
        return [self._owed(batch) for batch in pending if batch.callback_url]

    def _owed(self, batch: Batch) -> Owed:
        assert batch.callback_url is not None

        async def record(status: WebhookStatus, error: str | None) -> object:
            def mutate(b: Batch) -> Batch:
                update = {
                    "webhook_status": status,
                    "webhook_attempts": b.webhook_attempts + 1,
                    "webhook_last_error": error,
                }
                return b.model_copy(update=update)

            return await self._store.update(batch.id, mutate)

        event = f"batch.{batch.status.value}"
        return Owed(
            batch.id, batch.callback_url, event, batch.view(), batch.webhook_attempts, record
        )


class WebhookSender:
    def __init__(
        self,
        settings: Settings,
        sources: Sequence[WebhookSource],
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._settings = settings
        self._sources = sources
        self._client = client or httpx.AsyncClient(
            timeout=settings.webhook_timeout_s, follow_redirects=False
        )
        self._kick = asyncio.Event()
        self._due: dict[str, float] = {}

    def kick(self) -> None:
        """Something finished with a callback: look at pending deliveries now."""
        self._kick.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._kick.clear()
            now = loop.time()
            pending = [owed for source in self._sources for owed in await source.owed()]
            due = [owed for owed in pending if self._due.get(owed.key, 0.0) <= now]
            await asyncio.gather(*(self._deliver(owed) for owed in due))
            waiting = [self._due[o.key] for o in pending if o.key in self._due]
            timeout = max(min(waiting) - loop.time(), 0.0) if waiting else None
            if due and timeout is None:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), timeout)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _deliver(self, owed: Owed) -> None:
        error: str | None = None
        blocked = False
        try:
            target = await outbound.resolve(owed.url, self._settings.webhook_allow)
            response = await self._client.post(
                target.url,
                json=owed.body,
                headers={"X-Asrserve-Event": owed.event, "Host": target.host_header},
                extensions={"sni_hostname": target.host},
            )
            if not response.is_success:  # a redirect (3xx) is not followed: it fails too
                error = f"HTTP {response.status_code}"
        except outbound.BlockedUrl as exc:
            error, blocked = f"blocked: {exc}", True
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        attempts = owed.attempts + 1
        if error is None:
            status = WebhookStatus.DELIVERED
        elif blocked or attempts >= self._settings.webhook_max_attempts:
            status = WebhookStatus.FAILED
        else:
            status = WebhookStatus.PENDING
        await owed.record(status, error)
        if status is WebhookStatus.PENDING:
            delay = self._settings.webhook_backoff_s * 2 ** (attempts - 1)
            self._due[owed.key] = asyncio.get_running_loop().time() + delay
            log.info("webhook for %s failed (%s); retry in %.1f s", owed.key, error, delay)
        else:
            self._due.pop(owed.key, None)
