"""What each worker node reports about itself, so that any API node can show the whole
deployment: the hash ``{prefix}:workers``, node name → its latest report (JSON).

Workers report every third of a lease. A report older than three leases is a node that
died without saying goodbye: readers skip it and delete it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis.asyncio as aioredis


class WorkerRegistry:
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

    async def throughput(self) -> float | None:
        """Measured audio seconds per second of every live worker together."""
        measured = [r["throughput"] for r in await self.alive() if r.get("throughput")]
        return sum(measured) if measured else None
