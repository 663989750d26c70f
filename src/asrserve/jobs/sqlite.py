"""Jobs in SQLite: one row per job, JSON for the nested parts."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from asrserve.drivers.sqlite import Database, page_filter
from asrserve.jobs.models import BatchBacklog, Job, JobStatus, WebhookStatus
from asrserve.jobs.store import JobStore, Mutation

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    priority INTEGER NOT NULL,
    options TEXT NOT NULL,
    filename TEXT NOT NULL,
    audio_path TEXT NOT NULL,
    audio_bytes INTEGER NOT NULL,
    audio_duration REAL,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    attempts INTEGER NOT NULL,
    error TEXT,
    result TEXT,
    callback_url TEXT,
    webhook_status TEXT,
    webhook_attempts INTEGER NOT NULL,
    webhook_last_error TEXT,
    deadline_at REAL,
    batch_id TEXT,
    owns_audio INTEGER NOT NULL DEFAULT 1,
    owner TEXT,
    admitted_s REAL NOT NULL DEFAULT 0,
    progress TEXT,
    keep_alive REAL,
    keep_alive_floor INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, id);
CREATE INDEX IF NOT EXISTS jobs_webhook ON jobs (webhook_status);
"""
# Columns added after the first release: (name, declaration) for databases made before them.
ADDED_COLUMNS = (
    ("batch_id", "TEXT"),
    ("owns_audio", "INTEGER NOT NULL DEFAULT 1"),
    ("owner", "TEXT"),
    ("admitted_s", "REAL NOT NULL DEFAULT 0"),
    ("progress", "TEXT"),
    ("keep_alive", "REAL"),
    ("keep_alive_floor", "INTEGER NOT NULL DEFAULT 0"),
)
INDEXES = "CREATE INDEX IF NOT EXISTS jobs_batch ON jobs (batch_id, status);"

COLUMNS = tuple(Job.model_fields)
_PLACEHOLDERS = ", ".join("?" for _ in COLUMNS)
INSERT = f"INSERT INTO jobs ({', '.join(COLUMNS)}) VALUES ({_PLACEHOLDERS})"
INSERT_OR_IGNORE = INSERT.replace("INSERT", "INSERT OR IGNORE", 1)
JSON_COLUMNS = ("options", "error", "result", "progress")


def _to_row(job: Job) -> tuple[Any, ...]:
    data = job.model_dump(mode="json")
    values = []
    for name in COLUMNS:
        value = data[name]
        if name in JSON_COLUMNS and value is not None:
            value = getattr(job, name).model_dump_json()
        values.append(value)
    return tuple(values)


def _from_row(row: sqlite3.Row) -> Job:
    data: dict[str, Any] = dict(row)
    for name in JSON_COLUMNS:
        if data[name] is not None:
            data[name] = json.loads(data[name])
    return Job.model_validate(data)


class SqliteJobStore(JobStore):
    def __init__(self, db: Database) -> None:
        self._db = db
        db.migrate(SCHEMA)
        db.add_columns("jobs", ADDED_COLUMNS)
        db.migrate(INDEXES)

    async def create(self, job: Job) -> None:
        await self._db.run(lambda c: c.execute(INSERT, _to_row(job)) and None)

    async def create_many(self, jobs: Sequence[Job]) -> None:
        rows = [_to_row(job) for job in jobs]
        await self._db.run(lambda c: c.executemany(INSERT_OR_IGNORE, rows) and None)

    async def batch_counts(self, batch_id: str) -> dict[JobStatus, int]:
        rows = await self._db.run(
            lambda c: c.execute(
                "SELECT status, COUNT(*) AS n FROM jobs WHERE batch_id = ? GROUP BY status",
                (batch_id,),
            ).fetchall()
        )
        return {JobStatus(r["status"]): r["n"] for r in rows}

    async def batch_jobs(
        self, batch_id: str, *, unfinished: bool = False, limit: int | None = None
    ) -> list[Job]:
        sql = "SELECT * FROM jobs WHERE batch_id = ?"
        params: tuple[Any, ...] = (batch_id,)
        if unfinished:
            sql += " AND status IN (?, ?)"
            params = (batch_id, JobStatus.QUEUED.value, JobStatus.RUNNING.value)
        sql += " ORDER BY id"
        if limit is not None:
            sql, params = sql + " LIMIT ?", (*params, limit)
        return await self._select(sql, params)

    async def batch_backlog(self, batch_id: str) -> BatchBacklog:
        def read(conn: sqlite3.Connection) -> BatchBacklog:
            where = "FROM jobs WHERE batch_id = ? AND status = ?"
            queued = conn.execute(
                f"SELECT COALESCE(SUM(admitted_s), 0) {where}", (batch_id, JobStatus.QUEUED.value)
            ).fetchone()[0]
            running = conn.execute(
                f"SELECT * {where} ORDER BY id", (batch_id, JobStatus.RUNNING.value)
            ).fetchall()
            return BatchBacklog(float(queued), [_from_row(row) for row in running])

        return await self._db.run(read)

    async def get(self, job_id: str) -> Job | None:
        return await self._db.run(lambda c: _get(c, job_id))

    async def update(self, job_id: str, mutate: Mutation) -> Job | None:
        return await self._db.run(lambda conn: _update(conn, job_id, mutate))

    async def update_many(self, job_ids: Sequence[str], mutate: Mutation) -> list[Job]:
        """One transaction for all: 50,000 jobs of a cancelled batch in one store call."""

        def tx(conn: sqlite3.Connection) -> list[Job]:
            changed = [_update(conn, job_id, mutate) for job_id in job_ids]
            return [job for job in changed if job is not None]

        return await self._db.run(tx)

    async def page(
        self,
        *,
        status: JobStatus | None = None,
        limit: int = 20,
        after: str | None = None,
        owner: str | None = None,
    ) -> list[Job]:
        where, params = page_filter(after, owner=owner, status=status.value if status else None)
        sql = f"SELECT * FROM jobs {where} ORDER BY id DESC LIMIT ?"
        return await self._select(sql, (*params, limit))

    async def unfinished(self) -> list[Job]:
        return await self._select(
            "SELECT * FROM jobs WHERE status IN (?, ?) ORDER BY id",
            (JobStatus.QUEUED.value, JobStatus.RUNNING.value),
        )

    async def webhooks_pending(self) -> list[Job]:
        return await self._select(
            "SELECT * FROM jobs WHERE webhook_status = ? ORDER BY id",
            (WebhookStatus.PENDING.value,),
        )

    async def audio_expired(self, finished_before: float) -> list[Job]:
        return await self._select(
            "SELECT * FROM jobs WHERE audio_path != '' AND owns_audio = 1"
            " AND finished_at IS NOT NULL AND finished_at < ? ORDER BY id",
            (finished_before,),
        )

    async def _select(self, sql: str, params: tuple[Any, ...]) -> list[Job]:
        rows = await self._db.run(lambda c: c.execute(sql, params).fetchall())
        return [_from_row(row) for row in rows]


def _get(conn: sqlite3.Connection, job_id: str) -> Job | None:
    row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return _from_row(row) if row is not None else None


def _update(conn: sqlite3.Connection, job_id: str, mutate: Mutation) -> Job | None:
    job = _get(conn, job_id)
    if job is None:
        return None
    new = mutate(job)
    if new is None:
        return None
    assignments = ", ".join(f"{name} = ?" for name in COLUMNS)
    conn.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*_to_row(new), job_id))
    return new
