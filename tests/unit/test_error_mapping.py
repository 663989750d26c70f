"""The core's errors as the HTTP edge answers them: status, OpenAI error body, Retry-After."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from asrserve.api.errors import install_error_handlers
from asrserve.audio.errors import AudioMissing, AudioTooLong, EmptyAudio, UnsupportedAudio
from asrserve.errors import (
    STATUS_OF_KIND,
    AsrError,
    ErrorKind,
    InvalidRequest,
    NotFound,
    QueueFull,
    QuotaExceeded,
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
