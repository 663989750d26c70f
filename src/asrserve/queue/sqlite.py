"""The embedded queue: a table in the service's SQLite file plus an in-process wake-up."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Mapping, Sequence

from asrserve.drivers.sqlite import Database
from asrserve.queue.base import Delivery, Queue
from asrserve.vocabulary import Priority
from asrserve.waiting import wait_event

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


DISCARD_CHUNK = 500  # ids per DELETE: under SQLite's limit of bound parameters


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
        self._signal()

    def _arm(self) -> asyncio.Event:
        return self._ready

    async def _wait(
        self, token: object, limits: Mapping[Priority, int], total: int, timeout: float
    ) -> list[Delivery]:
        assert isinstance(token, asyncio.Event)
        await wait_event(token, timeout)
        return []  # woken: the caller claims

    def _signal(self) -> None:
        """Wake every consumer armed so far; later ones arm the fresh event."""
        self._ready.set()
        self._ready = asyncio.Event()

    async def put_many(self, job_ids: Sequence[str], priority: Priority) -> None:
        now = time.time()
        rows = [(job_id, int(priority), now) for job_id in job_ids]
        await self._db.run(
            lambda c: (
                c.executemany(
                    "INSERT OR IGNORE INTO queue (job_id, priority, enqueued_at) VALUES (?, ?, ?)",
                    rows,
                )
                and None
            )
        )
        self._signal()

    async def _claim(self, limits: Mapping[Priority, int], total: int) -> list[Delivery]:
        def tx(conn: sqlite3.Connection) -> list[Delivery]:
            claimed: list[Delivery] = []
            for priority in sorted(limits):
                room = min(limits[priority], total - len(claimed))
                if room <= 0:
                    break
                rows = conn.execute(
                    "UPDATE queue SET claimed = 1, deliveries = deliveries + 1 WHERE rowid IN ("
                    " SELECT rowid FROM queue WHERE claimed = 0 AND priority = ?"
                    " ORDER BY enqueued_at, rowid LIMIT ?)"
                    " RETURNING job_id, deliveries, enqueued_at, rowid",
                    (int(priority), room),
                ).fetchall()
                rows.sort(key=lambda r: (r["enqueued_at"], r["rowid"]))
                claimed += [Delivery(r["job_id"], priority, r["deliveries"]) for r in rows]
            return claimed

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
        self._signal()

    async def discard(self, job_ids: Sequence[str], priority: Priority) -> None:
        ids = list(job_ids)

        def tx(conn: sqlite3.Connection) -> None:
            for start in range(0, len(ids), DISCARD_CHUNK):
                part = ids[start : start + DISCARD_CHUNK]
                marks = ",".join("?" * len(part))
                conn.execute(
                    f"DELETE FROM queue WHERE claimed = 0 AND job_id IN ({marks})",
                    part,
                )

        await self._db.run(tx)

    async def recover(self) -> int:
        count = await self._db.run(
            lambda c: c.execute("UPDATE queue SET claimed = 0 WHERE claimed = 1").rowcount
        )
        if count:
            self._signal()
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
