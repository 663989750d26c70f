"""One SQLite file (WAL) shared by the embedded stores and queue.

SQLite calls are short but may fsync, so they run in a worker thread; a lock serialises
them on the single connection. A transaction that SQLite cannot do (disk full, read-only,
I/O error, locked) fails with :class:`~asrserve.errors.StoreUnavailable`: the driver's error
is translated here, at the one place every SQLite store runs its statements.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from asrserve.errors import StorageFull, StoreUnavailable

T = TypeVar("T")

FULL_RETRY_AFTER_S = 60
UNAVAILABLE_RETRY_AFTER_S = 10


def translated(exc: sqlite3.OperationalError) -> StoreUnavailable:
    """What a client is told when the database cannot do its part: storage full when the
    disk is, unavailable otherwise (read-only, I/O error, locked); both worth a retry later."""
    code = getattr(exc, "sqlite_errorcode", None)
    if (code is not None and code & 0xFF == sqlite3.SQLITE_FULL) or "disk is full" in str(exc):
        return StorageFull(
            "the server's storage is full, so the request could not be recorded; retry later",
            retry_after=FULL_RETRY_AFTER_S,
        )
    return StoreUnavailable(
        "the server's database is unavailable right now; retry later",
        code="storage_unavailable",
        retry_after=UNAVAILABLE_RETRY_AFTER_S,
    )


class Database:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._conn = sqlite3.connect(
            str(path), check_same_thread=False, isolation_level=None, timeout=30.0
        )
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._lock = threading.Lock()

    def run_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one transaction (BEGIN IMMEDIATE ... COMMIT);
        :class:`StoreUnavailable` if SQLite cannot."""
        try:
            return self._transaction(fn)
        except sqlite3.OperationalError as exc:
            raise translated(exc) from exc

    def _transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(self._conn)
                self._conn.execute("COMMIT")
            except BaseException:
                # SQLite may have rolled back already (disk full, I/O error); a COMMIT that
                # failed otherwise leaves the transaction open, blocking every later one.
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            return result

    def migrate(self, schema: str) -> None:
        with self._lock:
            self._conn.executescript(schema)

    def add_columns(self, table: str, columns: Sequence[tuple[str, str]]) -> None:
        """Add the columns a table made by an earlier version lacks (a forward migration)."""
        with self._lock:
            have = {row["name"] for row in self._conn.execute(f"PRAGMA table_info({table})")}
            for name, declaration in columns:
                if name not in have:
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self.run_sync, fn)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def page_filter(after: str | None, **equal: object) -> tuple[str, tuple[object, ...]]:
    """The WHERE clause of a newest-first page: each named column equal to its value
    (``None``: no condition), and ``id < after`` to continue after the previous page."""
    conditions = {f"{column} = ?": value for column, value in equal.items() if value is not None}
    if after is not None:
        conditions["id < ?"] = after
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    return where, tuple(conditions.values())
