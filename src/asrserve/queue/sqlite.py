"""The embedded queue: a table in the service's SQLite file plus an in-process wake-up."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time

from asrserve.jobs.models import Priority
from asrserve.queue.base import Delivery, Queue
from asrserve.sqlite import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS queue (
    job_id TEXT PRIMARY KEY,
    priority INTEGER NOT NULL,
    enqueued_at REAL NOT NULL,
    claimed INTEGER NOT NULL DEFAULT 0,
    deliveries INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS queue_ready ON queue (claimed, priority, enqueued_at);
"""


class SqliteQueue(Queue):
    def __init__(self, db: Database) -> None:
        self._db = db
        self._ready = asyncio.Event()
        db.migrate(SCHEMA)

    async def put(self, job_id: str, priority: Priority) -> None:
        await self._db.run(
            lambda c: (
                c.execute(
                    "INSERT OR IGNORE INTO queue (job_id, priority, enqueued_at) VALUES (?, ?, ?)",
                    (job_id, int(priority), time.time()),
                )
                and None
            )
        )
        self._ready.set()

    def _arm(self) -> None:
        self._ready.clear()

    async def _wait(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), timeout)

    async def _claim(self, max_items: int) -> list[Delivery]:
        def tx(conn: sqlite3.Connection) -> list[Delivery]:
            rows = conn.execute(
                "UPDATE queue SET claimed = 1, deliveries = deliveries + 1 WHERE job_id IN ("
                " SELECT job_id FROM queue WHERE claimed = 0"
                " ORDER BY priority, enqueued_at LIMIT ?)"
                " RETURNING job_id, priority, deliveries, enqueued_at",
                (max_items,),
            ).fetchall()
            rows.sort(key=lambda r: (r["priority"], r["enqueued_at"]))
            return [Delivery(r["job_id"], Priority(r["priority"]), r["deliveries"]) for r in rows]

        return await self._db.run(tx)

    async def ack(self, delivery: Delivery) -> None:
        await self._db.run(
            lambda c: c.execute("DELETE FROM queue WHERE job_id = ?", (delivery.job_id,)) and None
        )

    async def release(self, delivery: Delivery) -> None:
        await self._db.run(
            lambda c: (
                c.execute(
                    "UPDATE queue SET claimed = 0, deliveries = MAX(deliveries - 1, 0)"
                    " WHERE job_id = ?",
                    (delivery.job_id,),
                )
                and None
            )
        )
        self._ready.set()

    async def recover(self) -> int:
        count = await self._db.run(
            lambda c: c.execute("UPDATE queue SET claimed = 0 WHERE claimed = 1").rowcount
        )
        if count:
            self._ready.set()
        return count

    async def depth(self) -> dict[Priority, int]:
        rows = await self._db.run(
            lambda c: c.execute(
                "SELECT priority, COUNT(*) AS n FROM queue WHERE claimed = 0 GROUP BY priority"
            ).fetchall()
        )
        counts = {priority: 0 for priority in Priority}
        counts.update({Priority(r["priority"]): r["n"] for r in rows})
        return counts
