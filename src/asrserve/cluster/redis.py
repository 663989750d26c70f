"""The distributed deployment's nodes, in Redis.

Registry: the hash ``{prefix}:workers``, node name → its latest report (JSON). Workers
report every third of a lease. A report older than three leases is a node that died
without saying goodbye: readers skip it and delete it.

Lease: each API node competes for one key (``SET NX PX``); the holder renews it every
third of its time to live and runs the duties; if it cannot renew (Redis unreachable, or
the lease was lost) it stops them, and another node takes over once the lease expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

import redis.asyncio as aioredis

from asrserve.cluster.base import Duties, Lease, WorkerRegistry
from asrserve.drivers.redis import UNREACHABLE

log = logging.getLogger(__name__)

RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisRegistry(WorkerRegistry):
    def __init__(self, client: aioredis.Redis, prefix: str, lease_s: float) -> None:
        self._client = client
        self._key = f"{prefix}:workers"
        self._max_age = 3 * lease_s

    async def report(self, node: str, view: dict[str, Any]) -> None:
        body = json.dumps({**view, "node": node, "reported_at": time.time()})
        await self._client.hset(self._key, node, body)

    async def forget(self, node: str) -> None:
        await self._client.hdel(self._key, node)

    async def alive(self) -> list[dict[str, Any]]:
        found = await self._client.hgetall(self._key)
        now = time.time()
        reports: list[dict[str, Any]] = []
        stale: list[bytes | str] = []
        for node, body in sorted(found.items()):
            report: dict[str, Any] = json.loads(body)
            if now - float(report.get("reported_at", 0.0)) > self._max_age:
                stale.append(node)
            else:
                reports.append(report)
        if stale:
            await self._client.hdel(self._key, *stale)
        return reports


class RedisLease(Lease):
    def __init__(self, client: aioredis.Redis, key: str, holder: str, ttl_s: float) -> None:
        self._client = client
        self._key = key
        self._holder = holder
        self._ttl_ms = max(int(ttl_s * 1000), 300)
        self._renew = client.register_script(RENEW)
        self._release = client.register_script(RELEASE)

    async def run(self, duties: Duties) -> None:
        """Compete for the lease forever; run ``duties`` while holding it."""
        while True:
            try:
                if await self._client.set(self._key, self._holder, nx=True, px=self._ttl_ms):
                    await self._lead(duties)
            except Exception as exc:
                if not _outage(exc):
                    log.exception("the leader's duties failed; competing for the lease again")
                else:
                    log.warning("leadership: redis unreachable (%s)", exc)
            await asyncio.sleep(self._ttl_ms / 3000)  # a lease timer, not a wait for an event

    async def _lead(self, duties: Duties) -> None:
        log.info("leading: running the batch runner, webhooks and retention here")
        task = asyncio.ensure_future(duties())
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self._ttl_ms / 3000)
                if done:
                    task.result()  # raises what the duties raised (logged by the caller)
                    return
                if not await self._renew(keys=[self._key], args=[self._holder, self._ttl_ms]):
                    log.warning("leadership lost; stopping the duties")
                    return
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await self.release()

    async def release(self) -> None:
        with contextlib.suppress(*UNREACHABLE):  # else it expires on its own
            await self._release(keys=[self._key], args=[self._holder])


def _outage(exc: BaseException) -> bool:
    """Redis was unreachable (the only error, or the only errors of a task group)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_outage(inner) for inner in exc.exceptions)
    return isinstance(exc, UNREACHABLE)
