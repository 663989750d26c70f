"""Webhook delivery: POST the finished job to its ``callback_url``, with retries.

The job row says whether a delivery is owed (``webhook_status = pending``), so deliveries
survive a restart. Failed attempts back off exponentially; every attempt is recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import httpx

from asrserve.jobs.models import Job, WebhookStatus
from asrserve.jobs.store import JobStore
from asrserve.settings import Settings

log = logging.getLogger(__name__)


class WebhookSender:
    def __init__(
        self,
        settings: Settings,
        store: JobStore,
        render: Callable[[Job], dict[str, Any]],
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._render = render
        self._client = client or httpx.AsyncClient(
            timeout=settings.webhook_timeout_s, follow_redirects=False
        )
        self._kick = asyncio.Event()
        self._due: dict[str, float] = {}

    def kick(self) -> None:
        """A job finished with a callback: look at pending deliveries now."""
        self._kick.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._kick.clear()
            now = loop.time()
            pending = await self._store.webhooks_pending()
            due = [job for job in pending if self._due.get(job.id, 0.0) <= now]
            await asyncio.gather(*(self._deliver(job) for job in due))
            waiting = [self._due[j.id] for j in pending if j.id in self._due]
            timeout = max(min(waiting) - loop.time(), 0.0) if waiting else None
            if due and timeout is None:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), timeout)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _deliver(self, job: Job) -> None:
        assert job.callback_url is not None
        error: str | None = None
        try:
            response = await self._client.post(
                job.callback_url,
                json=self._render(job),
                headers={"X-Asrserve-Event": f"job.{job.status.value}"},
            )
            if not response.is_success:
                error = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        attempts = job.webhook_attempts + 1
        if error is None:
            status = WebhookStatus.DELIVERED
        elif attempts >= self._settings.webhook_max_attempts:
            status = WebhookStatus.FAILED
        else:
            status = WebhookStatus.PENDING
        await self._store.record_webhook(job.id, status, error)
        if status is WebhookStatus.PENDING:
            delay = self._settings.webhook_backoff_s * 2 ** (attempts - 1)
            self._due[job.id] = asyncio.get_running_loop().time() + delay
            log.info("webhook for %s failed (%s); retry in %.1f s", job.id, error, delay)
        else:
            self._due.pop(job.id, None)
