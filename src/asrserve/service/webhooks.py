"""Webhook delivery: POST a finished job or batch to its callback URL, with retries.

The owner's stored row says whether a delivery is owed (``webhook_status = pending``), so
deliveries survive a restart. Failed attempts back off exponentially; every attempt is
recorded. Sources (jobs, batches) say what is owed; the sender only delivers, each
delivery signed with its API key's secret (:mod:`asrserve.service.signing`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from asrserve import outbound
from asrserve.batch_api.models import Batch
from asrserve.batch_api.store import BatchStore
from asrserve.jobs.models import Job, WebhookStatus
from asrserve.jobs.store import JobStore
from asrserve.service.fairness import round_robin
from asrserve.service.signing import Signer
from asrserve.settings.webhooks import WebhookSettings
from asrserve.waiting import wait_event

log = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 4096  # of a callback's answer: read, never kept


@dataclass(frozen=True)
class Owed:
    key: str  # unique across sources: a job or batch id
    url: str
    event: str  # sent as X-Asrserve-Event, e.g. job.succeeded, batch.completed
    body: dict[str, Any]
    attempts: int
    record: Callable[[WebhookStatus, str | None], Awaitable[object]]
    tenant: str | None = None  # the API key whose job or batch it is: its fair share


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
        body = self._render(job)
        return Owed(job.id, job.callback_url, event, body, job.webhook_attempts, record, job.owner)


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
        attempts = batch.webhook_attempts
        return Owed(
            batch.id, batch.callback_url, event, batch.view(), attempts, record, batch.owner
        )


class WebhookSender:
    """Delivers what the sources say is owed: each delivery is a task of its own (at most
    ``webhook_concurrency`` at once, one per job or batch), bounded by ``webhook_timeout_s``
    in all, and whatever goes wrong with it is recorded on its job or batch, never raised.

    Tenants (API keys) are served fairly: deliveries start round-robin across tenants, the
    fewest running first, and while another tenant has deliveries owed one tenant runs at
    most a quarter of the slots (at least one), so receivers that answer slowly delay their
    own tenant's webhooks, not others'. A tenant alone may take every slot.
    A delivery whose receiver timed out gets a quarter of the deadline on its retries."""

    def __init__(
        self,
        settings: WebhookSettings,
        sources: Sequence[WebhookSource],
        signer: Signer,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._settings = settings
        self._signer = signer
        self._sources = sources
        self._client = client or httpx.AsyncClient(
            timeout=settings.webhook_timeout_s, follow_redirects=False
        )
        self._kick = asyncio.Event()
        self._due: dict[str, float] = {}
        self._running: dict[str, str | None] = {}  # key → tenant
        self._settled: set[str] = set()  # ended while the owed list was being read
        self._timed_out: set[str] = set()  # keys whose receiver let a deadline pass
        self._share = max(1, settings.webhook_concurrency // 4)

    def kick(self) -> None:
        """Something finished with a callback: look at pending deliveries now."""
        self._kick.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as deliveries:  # cancelled with the sender
            while True:
                self._kick.clear()
                timeout = await self._start_due(deliveries)
                await wait_event(self._kick, timeout)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _start_due(self, deliveries: asyncio.TaskGroup) -> float | None:
        """Start the deliveries that are due and have room; the seconds until the next
        retry falls due (None: only a kick brings more work)."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._settled.clear()
        pending = [owed for source in self._sources for owed in await source.owed()]
        # an attempt that ended meanwhile may be read as still owed: its end kicks the loop,
        # and the next reading says what is owed after it
        busy = self._running.keys() | self._settled
        idle = [owed for owed in pending if owed.key not in busy]
        held = Counter(self._running.values())
        # one tenant alone (auth off: the one open caller) may take every slot
        tenants = {owed.tenant for owed in idle} | set(held)
        share = self._share if len(tenants) > 1 else self._settings.webhook_concurrency
        for owed in round_robin(idle, lambda one: one.tenant, held.__getitem__):
            if len(self._running) >= self._settings.webhook_concurrency:
                break  # a delivery ending kicks the loop
            if held[owed.tenant] < share and self._due.get(owed.key, 0.0) <= now:
                self._running[owed.key] = owed.tenant
                held[owed.tenant] += 1
                deliveries.create_task(self._attempt(owed), name=f"webhook {owed.key}")
        # due now but no room: started when a delivery ends, which kicks the loop
        waiting = [due for o in idle if (due := self._due.get(o.key, 0.0)) > now]
        return max(min(waiting) - loop.time(), 0.0) if waiting else None

    async def _attempt(self, owed: Owed) -> None:
        try:
            error, final = await self._deliver(owed)
            await self._record(owed, error, final=final)
        except Exception:  # the store failed: the row stays pending and is tried again
            log.exception("webhook for %s: could not record the attempt", owed.key)
            self._due[owed.key] = asyncio.get_running_loop().time() + self._retry_s(1)
        finally:
            self._running.pop(owed.key, None)
            self._settled.add(owed.key)
            self.kick()

    async def _deliver(self, owed: Owed) -> tuple[str | None, bool]:
        """The error (None when delivered) and whether retrying it is pointless."""
        deadline = self._settings.webhook_timeout_s
        if owed.key in self._timed_out:
            deadline /= 4
        try:
            async with asyncio.timeout(deadline):
                return await self._post(owed), False
        except outbound.InvalidUrl as exc:  # stored before intake checked it: never usable
            return f"invalid callback URL: {exc}", True
        except outbound.BlockedUrl as exc:  # the detail (what a name resolves to) is ours
            log.warning("webhook for %s blocked: %s", owed.key, exc)
            return f"blocked: {outbound.REFUSED}", True
        except TimeoutError:
            self._timed_out.add(owed.key)
            return f"no answer within {deadline:g} s", False
        except httpx.HTTPError as exc:  # the detail may name the address: kept in the log
            log.info("webhook for %s: %r", owed.key, exc)
            return type(exc).__name__, False
        except Exception as exc:
            log.exception("webhook for %s failed", owed.key)
            return type(exc).__name__, False

    async def _post(self, owed: Owed) -> str | None:
        """POST to the checked address; the error, or None on a 2xx answer. Only the first
        ``MAX_ANSWER_BYTES`` of the answer are read."""
        target = await outbound.resolve(owed.url, self._settings.webhook_allow)
        body = json.dumps(owed.body, separators=(",", ":")).encode()  # signed as sent
        headers = {
            "Content-Type": "application/json",
            "X-Asrserve-Event": owed.event,
            "Host": target.host_header,
            **self._signer.headers(owed.key, body, owed.tenant, int(time.time())),
        }
        async with self._client.stream(
            "POST",
            target.url,
            content=body,
            headers=headers,
            extensions={"sni_hostname": target.host},
        ) as response:
            read = 0
            async for chunk in response.aiter_raw():
                read += len(chunk)
                if read >= MAX_ANSWER_BYTES:
                    break
        if not response.is_success:  # a redirect (3xx) is not followed: it fails too
            return f"HTTP {response.status_code}"
        return None

    async def _record(self, owed: Owed, error: str | None, *, final: bool) -> None:
        attempts = owed.attempts + 1
        if error is None:
            status = WebhookStatus.DELIVERED
        elif final or attempts >= self._settings.webhook_max_attempts:
            status = WebhookStatus.FAILED
        else:
            status = WebhookStatus.PENDING
        await owed.record(status, error)
        if status is WebhookStatus.PENDING:
            delay = self._retry_s(attempts)
            self._due[owed.key] = asyncio.get_running_loop().time() + delay
            log.info("webhook for %s failed (%s); retry in %.1f s", owed.key, error, delay)
        else:
            self._due.pop(owed.key, None)
            self._timed_out.discard(owed.key)

    def _retry_s(self, attempts: int) -> float:
        return float(self._settings.webhook_backoff_s * 2 ** (attempts - 1))
