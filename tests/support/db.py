"""Reading a server's SQLite database from a test, as another process would."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any


def read_db(data_dir: Path, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    with contextlib.closing(sqlite3.connect(data_dir / "asrserve.db", timeout=30)) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute(sql, params).fetchall()
