"""Job events between nodes: Redis pub/sub on ``{prefix}:events``.

Each event is delivered here first, then published; other nodes' events are delivered here
as they arrive (a node skips its own). Pub/sub delivers at most once and only to connected
subscribers, so a node whose subscription lapsed may have missed events. Whenever Redis
confirms the subscription, the first time and after every reconnect (the driver also
reconnects on its own, silently, and subscribes again), this node wakes every local waiter,
which re-reads its job from the store, and tells its resync listeners (the batch runner and
webhook sender look again). Anything stored before the confirmation is then read; anything
published after it arrives. A connection that goes quiet is pinged, and one that does not
answer (a broker gone without closing it) is dropped and made again. Publishing is retried
until it gets through, except progress (event streams re-read on their own tick). Nothing
waits by polling.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub

from asrserve.drivers.redis import UNREACHABLE
from asrserve.events.base import Finished, JobEvents

log = logging.getLogger(__name__)

RECONNECT_MIN_S = 0.1
RECONNECT_MAX_S = 1.0  # a node learns of a returned broker within about this
KEEPALIVE_S = 5.0  # a quiet subscription is pinged, and dropped if this passes unanswered
PING = b"asrserve-events"


class SubscriptionLost(Exception):
    """The subscription's connection stopped answering."""


LOST: tuple[type[Exception], ...] = (*UNREACHABLE, SubscriptionLost)


class RedisEvents(JobEvents):
    def __init__(
        self, client: aioredis.Redis, prefix: str, *, keepalive_s: float = KEEPALIVE_S
    ) -> None:
        super().__init__()
        self._client = client
        self._channel = f"{prefix}:events"
        self._node = secrets.token_hex(6)
        self._keepalive_s = keepalive_s
        self._sending: set[asyncio.Task[None]] = set()

    def finished(self, notice: Finished) -> None:
        self._local.finished(notice)
        self._publish(
            {"kind": "finished", "job": notice.job_id, "batch": notice.batch_id,
             "callback": notice.callback}
        )  # fmt: skip

    def progressed(self, job_id: str) -> None:
        self._local.progressed(job_id)
        self._publish({"kind": "progress", "job": job_id}, retry=False)

    def batch_ended(self, batch_id: str) -> None:
        self._local.batch_ended(batch_id)
        self._publish({"kind": "batch_ended", "batch": batch_id})

    def cancelled(self, job_id: str) -> None:
        self._local.cancelled(job_id)
        self._publish({"kind": "cancelled", "job": job_id})

    def batch_api_changed(self) -> None:
        self._local.batch_api_changed()
        self._publish({"kind": "batches"})

    def _publish(self, message: dict[str, object], *, retry: bool = True) -> None:
        payload = json.dumps({**message, "node": self._node})
        task = asyncio.create_task(self._send(payload, retry))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, payload: str, retry: bool) -> None:
        """Publish; while Redis is unreachable, try again with a backoff (a node whose
        subscription lapsed too resyncs when it returns, but one that stayed connected
        would never hear of it otherwise)."""
        delay = RECONNECT_MIN_S
        while True:
            try:
                await self._client.publish(self._channel, payload)
                return
            except UNREACHABLE as exc:
                if not retry:
                    log.info("event not published (%s): %s", exc, payload)
                    return
                log.warning("event not published (%s), again in %.1f s: %s", exc, delay, payload)
            await asyncio.sleep(delay)  # a backoff: there is nothing to wait on
            delay = min(delay * 2, RECONNECT_MAX_S)

    async def listen(self) -> None:
        """Deliver other nodes' events here; reconnect with backoff. Runs until cancelled,
        whatever fails below it."""
        delay = RECONNECT_MIN_S
        while True:
            try:
                async with self._client.pubsub() as pubsub:
                    await pubsub.subscribe(self._channel)
                    async for kind, data in self._messages(pubsub):
                        if kind == "subscribe":  # confirmed: the first time, or again
                            delay = RECONNECT_MIN_S
                            self._local.resynced()
                        elif kind == "message":
                            self._dispatch(data)
            except LOST as exc:
                log.warning("event subscription lost (%s); again in %.1f s", exc, delay)
            except Exception:
                log.exception("event subscription failed; again in %.1f s", delay)
            await asyncio.sleep(delay)  # a reconnect backoff: there is nothing to wait on
            delay = min(delay * 2, RECONNECT_MAX_S)

    async def _messages(self, pubsub: PubSub) -> AsyncIterator[tuple[str, Any]]:
        """The subscription's messages (type, data). After ``keepalive_s`` of quiet the
        connection is pinged; if nothing at all comes back for another ``keepalive_s``, it
        is given up (:class:`SubscriptionLost`)."""
        loop = asyncio.get_running_loop()
        pinged_at: float | None = None
        while True:
            message = await pubsub.get_message(timeout=self._keepalive_s)
            if message is not None:
                pinged_at = None
                yield str(message["type"]), message["data"]
            elif pinged_at is None:
                await pubsub.ping(PING)
                pinged_at = loop.time()
            elif loop.time() - pinged_at >= self._keepalive_s:
                raise SubscriptionLost(f"no answer to a ping in {self._keepalive_s:.1f} s")

    def _dispatch(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except ValueError:
            return
        if event.get("node") == self._node:
            return
        if event.get("kind") == "finished":
            notice = Finished(str(event["job"]), event.get("batch"), bool(event.get("callback")))
            self._local.finished(notice)
        elif event.get("kind") == "progress":
            self._local.progressed(str(event["job"]))
        elif event.get("kind") == "batch_ended":
            self._local.batch_ended(str(event["batch"]))
        elif event.get("kind") == "cancelled":
            self._local.cancelled(str(event["job"]))
        elif event.get("kind") == "batches":
            self._local.batch_api_changed()

    async def sent(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every event published so far to be sent."""
        if not self._sending:
            return True
        _, pending = await asyncio.wait(self._sending, timeout=timeout)
        return not pending

    async def aclose(self) -> None:
        await self.sent(timeout=2.0)
