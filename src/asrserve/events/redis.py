"""Job events between nodes: Redis pub/sub on ``{prefix}:events``.

Each event is delivered here first, then published; other nodes' events are delivered here
as they arrive (a node skips its own). Pub/sub delivers at most once and only to connected
subscribers, so a node that was disconnected may have missed events: when its subscription
is (re)established it wakes every local waiter, which re-reads its job from the store, and
tells its resync listeners (the batch runner and webhook sender look again). Nothing waits
by polling.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets

import redis.asyncio as aioredis

from asrserve.drivers.redis import UNREACHABLE
from asrserve.events.base import Finished, JobEvents

log = logging.getLogger(__name__)

RECONNECT_MAX_S = 5.0


class RedisEvents(JobEvents):
    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        super().__init__()
        self._client = client
        self._channel = f"{prefix}:events"
        self._node = secrets.token_hex(6)
        self._sending: set[asyncio.Task[None]] = set()

    def finished(self, notice: Finished) -> None:
        self._local.finished(notice)
        self._publish(
            {"kind": "finished", "job": notice.job_id, "batch": notice.batch_id,
             "callback": notice.callback}
        )  # fmt: skip

    def progressed(self, job_id: str) -> None:
        self._local.progressed(job_id)
        self._publish({"kind": "progress", "job": job_id})

    def batch_ended(self, batch_id: str) -> None:
        self._local.batch_ended(batch_id)
        self._publish({"kind": "batch_ended", "batch": batch_id})

    def cancelled(self, job_id: str) -> None:
        self._local.cancelled(job_id)
        self._publish({"kind": "cancelled", "job": job_id})

    def batch_api_changed(self) -> None:
        self._local.batch_api_changed()
        self._publish({"kind": "batches"})

    def _publish(self, message: dict[str, object]) -> None:
        task = asyncio.create_task(self._send(json.dumps({**message, "node": self._node})))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, payload: str) -> None:
        try:
            await self._client.publish(self._channel, payload)
        except UNREACHABLE as exc:  # other nodes resync when their subscription returns
            log.warning("event not published (%s): %s", exc, payload)

    async def listen(self) -> None:
        """Deliver other nodes' events here; reconnect with backoff. Runs until cancelled."""
        delay = 0.1
        while True:
            try:
                async with self._client.pubsub() as pubsub:
                    await pubsub.subscribe(self._channel)
                    delay = 0.1
                    self._local.resynced()
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            self._dispatch(message["data"])
            except UNREACHABLE as exc:
                log.warning("event subscription lost (%s); retrying in %.1f s", exc, delay)
            await asyncio.sleep(delay)  # a reconnect backoff: there is nothing to wait on
            delay = min(delay * 2, RECONNECT_MAX_S)

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

    async def aclose(self) -> None:
        if self._sending:
            await asyncio.wait(self._sending, timeout=2.0)
