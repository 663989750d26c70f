"""Batches and their items in the service's SQLite database."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from asrserve.batch_api.models import Batch, BatchItem, BatchStatus
from asrserve.batch_api.store import BatchMutation, BatchStore
from asrserve.drivers.sqlite import Database, page_filter
from asrserve.jobs.models import WebhookStatus

SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    webhook_status TEXT,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS batches_status ON batches (status, id);
CREATE TABLE IF NOT EXISTS batch_items (
    batch_id TEXT NOT NULL,
    line INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (batch_id, line)
);
"""

ACTIVE = tuple(s.value for s in BatchStatus if not s.finished)
ADDED_COLUMNS = (("owner", "TEXT"),)


def _row(batch: Batch) -> tuple[str, str, str | None, str, str | None]:
    webhook = batch.webhook_status.value if batch.webhook_status else None
    return (batch.id, batch.status.value, webhook, batch.model_dump_json(), batch.owner)


class SqliteBatchStore(BatchStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        db.migrate(SCHEMA)
        db.add_columns("batches", ADDED_COLUMNS)

    async def create(self, batch: Batch) -> None:
        row = _row(batch)
        await self._db.run(
            lambda c: (
                c.execute(
                    "INSERT INTO batches (id, status, webhook_status, data, owner)"
                    " VALUES (?, ?, ?, ?, ?)",
                    row,
                )
                and None
            )
        )

    async def get(self, batch_id: str) -> Batch | None:
        return await self._db.run(lambda c: _get(c, batch_id))

    async def update(self, batch_id: str, mutate: BatchMutation) -> Batch | None:
        def tx(conn: sqlite3.Connection) -> Batch | None:
            batch = _get(conn, batch_id)
            new = None if batch is None else mutate(batch)
            if new is None:
                return None
            _, status, webhook, data, _ = _row(new)
            conn.execute(
                "UPDATE batches SET status = ?, webhook_status = ?, data = ? WHERE id = ?",
                (status, webhook, data, batch_id),
            )
            return new

        return await self._db.run(tx)

    async def page(
        self, *, limit: int = 20, after: str | None = None, owner: str | None = None
    ) -> list[Batch]:
        where, params = page_filter(after, owner=owner)
        sql = f"SELECT data FROM batches {where} ORDER BY id DESC LIMIT ?"
        return await self._select(sql, (*params, limit))

    async def active(self) -> list[Batch]:
        marks = ", ".join("?" for _ in ACTIVE)
        return await self._select(
            f"SELECT data FROM batches WHERE status IN ({marks}) ORDER BY id", ACTIVE
        )

    async def webhooks_pending(self) -> list[Batch]:
        return await self._select(
            "SELECT data FROM batches WHERE webhook_status = ? ORDER BY id",
            (WebhookStatus.PENDING.value,),
        )

    async def add_items(self, items: Sequence[BatchItem]) -> None:
        rows = [(item.batch_id, item.line, item.model_dump_json()) for item in items]
        await self._db.run(
            lambda c: (
                c.executemany("INSERT OR IGNORE INTO batch_items VALUES (?, ?, ?)", rows) and None
            )
        )

    async def items(self, batch_id: str) -> list[BatchItem]:
        rows = await self._db.run(
            lambda c: c.execute(
                "SELECT data FROM batch_items WHERE batch_id = ? ORDER BY line", (batch_id,)
            ).fetchall()
        )
        return [BatchItem.model_validate_json(row["data"]) for row in rows]

    async def _select(self, sql: str, params: tuple[object, ...]) -> list[Batch]:
        rows = await self._db.run(lambda c: c.execute(sql, params).fetchall())
        return [Batch.model_validate_json(row["data"]) for row in rows]


def _get(conn: sqlite3.Connection, batch_id: str) -> Batch | None:
    row = conn.execute("SELECT data FROM batches WHERE id = ?", (batch_id,)).fetchone()
    return None if row is None else Batch.model_validate_json(row["data"])
