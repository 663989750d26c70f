"""The core's errors as the HTTP edge answers them: status, OpenAI error body, Retry-After."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from asrserve.api.errors import install_error_handlers
from asrserve.audio.errors import AudioTooLong, EmptyAudio, UnsupportedAudio
from asrserve.drivers.redis import BrokerUnavailable, connect
from asrserve.drivers.sqlite import Database
from asrserve.errors import (
    STATUS_OF_KIND,
    AsrError,
    AudioMissing,
    Conflict,
    DeadlineExceeded,
    ErrorKind,
    InvalidRequest,
    NotFound,
    QueueFull,
    QuotaExceeded,
    RequestTimeout,
    StorageFull,
    StoredError,
    StoreUnavailable,
    Unauthenticated,
)
from asrserve.jobs.models import JobError

# (the error, its status, OpenAI type, code, param, Retry-After)
CASES: list[tuple[AsrError, int, str, str | None, str | None, str | None]] = [
    (QueueFull("the async queue is full", retry_after=7), 429, "rate_limit_error",
     "queue_full", None, "7"),
    (QuotaExceeded("the daily quota is used up", retry_after=3600), 429, "rate_limit_error",
     "quota_exceeded", None, "3600"),
    (InvalidRequest("prompt is too long", param="prompt", code="prompt_too_long"), 400,
     "invalid_request_error", "prompt_too_long", "prompt", None),
    (InvalidRequest("a 'file' part is required", param="file"), 400,
     "invalid_request_error", None, "file", None),
    (NotFound("the audio file is no longer stored", code="file_not_found"), 404,
     "not_found_error", "file_not_found", None, None),
    (UnsupportedAudio("the file has no audio stream", param="file"), 415,
     "invalid_request_error", "unsupported_audio", "file", None),
    (AudioTooLong("audio is 90 s long; the limit of 60 s"), 413, "invalid_request_error",
     "audio_too_long", None, None),
    (EmptyAudio("the file contains no audio samples"), 400, "invalid_request_error",
     "empty_audio", None, None),
    (AudioMissing("the job's audio is no longer stored"), 410, "invalid_request_error",
     "audio_missing", None, None),
    (Conflict("the job was cancelled", code="job_cancelled"), 409, "conflict_error",
     "job_cancelled", None, None),
    (DeadlineExceeded("transcription did not finish within 3 s"), 504, "timeout_error",
     "deadline_exceeded", None, None),
    (StorageFull("the server's storage is full", retry_after=60), 507, "server_error",
     "insufficient_storage", None, "60"),
    (BrokerUnavailable("Redis is unreachable", retry_after=5), 503,
     "service_unavailable_error", "broker_unavailable", None, "5"),
    (StoredError(413, "audio is 90 s long", code="audio_too_long", param="file"), 413,
     "invalid_request_error", "audio_too_long", "file", None),
]  # fmt: skip


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/raise/{index}")
    async def fail(index: int) -> None:
        raise CASES[index][0]

    with TestClient(app) as client:
        yield client


@pytest.mark.parametrize(
    ("index", "status", "kind", "code", "param", "retry_after"),
    [(index, *case[1:]) for index, case in enumerate(CASES)],
    ids=[type(case[0]).__name__ for case in CASES],
)
def test_the_edge_answers_a_core_error(
    client: TestClient,
    index: int,
    status: int,
    kind: str,
    code: str | None,
    param: str | None,
    retry_after: str | None,
) -> None:
    response = client.get(f"/raise/{index}")
    assert response.status_code == status
    error = {"message": CASES[index][0].message, "type": kind, "param": param, "code": code}
    assert response.json() == {"error": error}
    assert response.headers.get("Retry-After") == retry_after


@pytest.mark.parametrize(
    "exc", [case[0] for case in CASES if case[0].code], ids=lambda exc: type(exc).__name__
)
def test_a_failed_job_stores_the_status_the_edge_answers_with(exc: AsrError) -> None:
    status = next(case[1] for case in CASES if case[0] is exc)
    assert JobError.of(exc) == JobError(status=status, code=exc.code or "", message=exc.message)


def test_every_kind_has_a_status() -> None:
    assert set(STATUS_OF_KIND) == set(ErrorKind)


@pytest.mark.parametrize(
    ("exc", "header", "value"),
    [
        (Unauthenticated("a valid API key is required"), "WWW-Authenticate", "Bearer"),
        (RequestTimeout("the upload stalled", code="upload_timeout"), "Connection", "close"),
    ],
    ids=["401", "408"],
)
def test_a_kind_brings_the_header_it_needs(exc: AsrError, header: str, value: str) -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/")
    async def fail() -> None:
        raise exc

    with TestClient(app) as client:
        response = client.get("/")
    assert (response.status_code, response.headers.get(header)) == (exc.status, value)


def test_a_failed_job_is_told_again_with_its_stored_status() -> None:
    stored = JobError.of(QuotaExceeded("the daily quota is used up", retry_after=60))
    again = StoredError(stored.status, stored.message, code=stored.code)
    assert (again.kind, again.status, again.code) == (ErrorKind.RATE_LIMITED, 429, stored.code)


def test_sqlite_errors_leave_the_database_as_store_unavailable(tmp_path: Path) -> None:
    """A write SQLite refuses (the connection made read-only, as a read-only file would be)
    reaches the database's caller as the core's error, with the driver's error as its cause."""
    database = Database(tmp_path / "t.db")
    database.migrate("CREATE TABLE t (x INTEGER)")

    def write(conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA query_only = ON")
        conn.execute("INSERT INTO t VALUES (1)")

    with pytest.raises(StoreUnavailable) as failed:
        database.run_sync(write)
    database.close()
    assert failed.value.code == "storage_unavailable" and failed.value.retry_after == 10
    assert isinstance(failed.value.__cause__, sqlite3.OperationalError)


def test_an_unreachable_redis_is_broker_unavailable_to_commands_and_pipelines() -> None:
    """Port 1 on loopback refuses: the client's commands and pipelines both fail with the
    core's error, never the driver's."""

    async def calls() -> list[AsrError]:
        client = connect("redis://127.0.0.1:1/0")
        failures: list[AsrError] = []
        pipeline = client.pipeline(transaction=True)
        pipeline.incr("n")
        for call in (client.ping(), pipeline.execute()):
            try:
                await call
            except BrokerUnavailable as exc:
                failures.append(exc)
        await client.aclose()
        return failures

    failures = asyncio.run(calls())
    assert [(f.code, f.status, f.retry_after) for f in failures] == [
        ("broker_unavailable", 503, 5)
    ] * 2
