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


SUMMED = (
    *("batches", "items", "dropped", "audio_seconds", "padded_frames", "total_frames"),
    *("pending_chunks", "jobs_in_flight"),
)
MERGED = ("batch_sizes", "queued_items", "queued_audio_seconds", "pending_by_window")
PER_DEVICE = ("device_busy_seconds", "device_busy_fraction")
SHARED = ("policy", "max_batch_size", "max_wait_ms", "encoder_window", "encoder_windows_s")


def merge(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The worker nodes' scheduler views as one (what the dashboard shows): counts summed,
    devices named ``node/device``, means recomputed from the sums."""
    view: dict[str, Any] = {key: reports[0][key] for key in SHARED if reports and key in reports[0]}
    for key in SUMMED:
        view[key] = sum(r.get(key, 0) for r in reports)
    for key in MERGED:
        totals: dict[str, float] = {}
        for report in reports:
            for label, value in report.get(key, {}).items():
                totals[label] = totals.get(label, 0) + value
        view[key] = dict(sorted(totals.items(), key=lambda item: _label_order(item[0])))
    for key in PER_DEVICE:
        view[key] = {f"{r['node']}/{d}": v for r in reports for d, v in r.get(key, {}).items()}
    view["devices"] = list(view["device_busy_seconds"])
    items, batches = view["items"], view["batches"]
    waited = sum(r.get("mean_queue_wait_s", 0.0) * r.get("items", 0) for r in reports)
    view["mean_batch_size"] = items / batches if batches else 0.0
    view["mean_queue_wait_s"] = waited / items if items else 0.0
    frames = view["total_frames"]
    view["padding_waste"] = round(view["padded_frames"] / frames, 4) if frames else 0.0
    return view


def _label_order(label: str) -> tuple[float, str]:
    """Numeric labels ("16", "5s") in numeric order."""
    try:
        return float(label.rstrip("s")), label
    except ValueError:
        return float("inf"), label
