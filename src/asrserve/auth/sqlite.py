"""API keys and their daily audio and device usage in the service's SQLite database."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping

from asrserve.auth.keys import ApiKey, DeviceUsage, DuplicateName, KeyStore
from asrserve.drivers.sqlite import Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE,
    revoked_at REAL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS key_usage (
    key_id TEXT NOT NULL,
    day TEXT NOT NULL,
    audio_s REAL NOT NULL,
    PRIMARY KEY (key_id, day)
);
CREATE TABLE IF NOT EXISTS key_device_usage (
    key_id TEXT NOT NULL,
    day TEXT NOT NULL,
    device_s REAL NOT NULL,
    audio_s REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (key_id, day)
);
"""


class SqliteKeyStore(KeyStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        db.migrate(SCHEMA)
        db.add_columns("key_device_usage", [("audio_s", "REAL NOT NULL DEFAULT 0")])

    async def create(self, key: ApiKey) -> None:
        def tx(conn: sqlite3.Connection) -> None:
            taken = conn.execute(
                "SELECT 1 FROM api_keys WHERE name = ? AND revoked_at IS NULL", (key.name,)
            ).fetchone()
            if taken:
                raise DuplicateName(f"an active key is already named '{key.name}'")
            conn.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?, ?)",
                (key.id, key.name, key.hash, key.revoked_at, key.model_dump_json()),
            )

        await self._db.run(tx)

    async def find(self, digest: str) -> ApiKey | None:
        row = await self._db.run(
            lambda c: c.execute("SELECT data FROM api_keys WHERE hash = ?", (digest,)).fetchone()
        )
        return None if row is None else ApiKey.model_validate_json(row["data"])

    async def get(self, key_id: str) -> ApiKey | None:
        row = await self._db.run(
            lambda c: c.execute("SELECT data FROM api_keys WHERE id = ?", (key_id,)).fetchone()
        )
        return None if row is None else ApiKey.model_validate_json(row["data"])

    async def all(self) -> list[ApiKey]:
        rows = await self._db.run(
            lambda c: c.execute("SELECT data FROM api_keys ORDER BY rowid").fetchall()
        )
        return [ApiKey.model_validate_json(row["data"]) for row in rows]

    async def revoke(self, id_or_name: str) -> ApiKey | None:
        def tx(conn: sqlite3.Connection) -> ApiKey | None:
            row = conn.execute(
                "SELECT data FROM api_keys WHERE (id = ? OR name = ?) AND revoked_at IS NULL",
                (id_or_name, id_or_name),
            ).fetchone()
            if row is None:
                return None
            key = ApiKey.model_validate_json(row["data"])
            revoked = key.model_copy(update={"revoked_at": time.time()})
            conn.execute(
                "UPDATE api_keys SET revoked_at = ?, data = ? WHERE id = ?",
                (revoked.revoked_at, revoked.model_dump_json(), key.id),
            )
            return revoked

        return await self._db.run(tx)

    async def charge(self, key_id: str, day: str, seconds: float, limit: float) -> float | None:
        def tx(conn: sqlite3.Connection) -> float | None:
            row = conn.execute(
                "SELECT audio_s FROM key_usage WHERE key_id = ? AND day = ?", (key_id, day)
            ).fetchone()
            total = (row["audio_s"] if row else 0.0) + seconds
            if total > limit:
                return None
            conn.execute(
                "INSERT INTO key_usage VALUES (?, ?, ?) ON CONFLICT (key_id, day)"
                " DO UPDATE SET audio_s = excluded.audio_s",
                (key_id, day, total),
            )
            return total

        return await self._db.run(tx)

    async def spend(self, spent: Mapping[str, DeviceUsage], day: str) -> None:
        rows = [(key_id, day, used.device_s, used.audio_s) for key_id, used in spent.items()]
        await self._db.run(
            lambda c: c.executemany(
                "INSERT INTO key_device_usage (key_id, day, device_s, audio_s)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (key_id, day) DO UPDATE SET"
                " device_s = device_s + excluded.device_s, audio_s = audio_s + excluded.audio_s",
                rows,
            )
        )

    async def spent(self, key_id: str, day: str) -> DeviceUsage:
        row = await self._db.run(
            lambda c: c.execute(
                "SELECT device_s, audio_s FROM key_device_usage WHERE key_id = ? AND day = ?",
                (key_id, day),
            ).fetchone()
        )
        return DeviceUsage() if row is None else DeviceUsage(row["device_s"], row["audio_s"])
