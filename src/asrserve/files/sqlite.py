"""File records in the service's SQLite database."""

from __future__ import annotations

import sqlite3
from typing import Any

from asrserve.drivers.sqlite import Database, page_filter
from asrserve.files.models import FilePurpose, StoredFile
from asrserve.files.store import FileStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY,
    purpose TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS files_purpose ON files (purpose, id);
"""
ADDED_COLUMNS = (("owner", "TEXT"),)


class SqliteFileStore(FileStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        db.migrate(SCHEMA)
        db.add_columns("files", ADDED_COLUMNS)

    async def put(self, record: StoredFile) -> None:
        row = (record.id, record.purpose.value, _json(record), record.owner)
        await self._db.run(
            lambda c: (
                c.execute(
                    "INSERT OR REPLACE INTO files (id, purpose, data, owner) VALUES (?, ?, ?, ?)",
                    row,
                )
                and None
            )
        )

    async def get(self, file_id: str) -> StoredFile | None:
        row = await self._db.run(
            lambda c: c.execute("SELECT data, owner FROM files WHERE id = ?", (file_id,)).fetchone()
        )
        return None if row is None else _record(row)

    async def delete(self, file_id: str) -> bool:
        count: int = await self._db.run(
            lambda c: c.execute("DELETE FROM files WHERE id = ?", (file_id,)).rowcount
        )
        return count > 0

    async def page(
        self,
        *,
        purpose: FilePurpose | None = None,
        limit: int = 20,
        after: str | None = None,
        owner: str | None = None,
    ) -> list[StoredFile]:
        where, params = page_filter(after, owner=owner, purpose=purpose.value if purpose else None)
        sql = f"SELECT data, owner FROM files {where} ORDER BY id DESC LIMIT ?"
        args: tuple[Any, ...] = (*params, limit)

        def select(conn: sqlite3.Connection) -> list[sqlite3.Row]:
            return conn.execute(sql, args).fetchall()

        rows = await self._db.run(select)
        return [_record(row) for row in rows]


def _json(record: StoredFile) -> str:
    return record.model_dump_json()


def _record(row: sqlite3.Row) -> StoredFile:
    return StoredFile.model_validate_json(row["data"]).model_copy(update={"owner": row["owner"]})
