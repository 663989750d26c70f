"""The service's transcription and jobs API as the tests drive it over HTTP: a real server's
(``httpx``) or the in-process app's (``TestClient``, an ``httpx2`` client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, overload

import httpx
import httpx2

from tests.support.wait import wait_until

Client = httpx.Client | httpx2.Client
Response = httpx.Response | httpx2.Response


@overload
def transcribe(
    client: httpx.Client, path: Path, response_format: str = ..., **fields: str
) -> httpx.Response: ...
@overload
def transcribe(
    client: httpx2.Client, path: Path, response_format: str = ..., **fields: str
) -> httpx2.Response: ...
def transcribe(
    client: Client, path: Path, response_format: str = "json", **fields: str
) -> Response:
    with path.open("rb") as audio:
        return client.post(
            "/v1/audio/transcriptions",
            files={"file": (path.name, audio)},
            data={"model": "whisper-1", "response_format": response_format, **fields},
        )


def transcribe_text(client: Client, path: Path) -> str:
    response = transcribe(client, path)
    assert response.status_code == 200, response.text
    text = response.json()["text"]
    assert isinstance(text, str)
    return text


def submit_job(client: Client, path: Path, **fields: str) -> dict[str, Any]:
    """POST /v1/jobs: the 202 answers the job as it was queued."""
    with path.open("rb") as audio:
        response = client.post("/v1/jobs", files={"file": (path.name, audio)}, data=fields)
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["status"] == "queued", job
    return job


def job_status(client: Client, job_id: str) -> str:
    status = client.get(f"/v1/jobs/{job_id}").json()["status"]
    assert isinstance(status, str)
    return status


def wait_job(
    client: Client, job_id: str, wait: float = 30.0, timeout: float = 240.0
) -> dict[str, Any]:
    """The job once it has ended, long-polling (``wait`` s a request)."""

    def ended() -> dict[str, Any] | None:
        response = client.get(f"/v1/jobs/{job_id}", params={"wait": wait})
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        return None if job["status"] in ("queued", "running") else job

    return wait_until(ended, timeout, f"job {job_id} to end", every=0)
