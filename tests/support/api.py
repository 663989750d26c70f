"""The service's transcription and jobs API as the end-to-end tests drive it over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.support.wait import wait_until


def transcribe(
    client: httpx.Client, path: Path, response_format: str = "json", **fields: str
) -> httpx.Response:
    with path.open("rb") as audio:
        return client.post(
            "/v1/audio/transcriptions",
            files={"file": (path.name, audio)},
            data={"model": "whisper-1", "response_format": response_format, **fields},
        )


def transcribe_text(client: httpx.Client, path: Path) -> str:
    response = transcribe(client, path)
    assert response.status_code == 200, response.text
    text = response.json()["text"]
    assert isinstance(text, str)
    return text


def submit_job(client: httpx.Client, path: Path, **fields: str) -> dict[str, Any]:
    """POST /v1/jobs: the 202 answers the job as it was queued."""
    with path.open("rb") as audio:
        response = client.post("/v1/jobs", files={"file": (path.name, audio)}, data=fields)
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["status"] == "queued", job
    return job


def wait_job(
    client: httpx.Client, job_id: str, wait: float = 30.0, timeout: float = 240.0
) -> dict[str, Any]:
    """The job once it has ended, long-polling (``wait`` s a request)."""

    def ended() -> dict[str, Any] | None:
        response = client.get(f"/v1/jobs/{job_id}", params={"wait": wait})
        assert response.status_code == 200, response.text
        job: dict[str, Any] = response.json()
        return None if job["status"] in ("queued", "running") else job

    return wait_until(ended, timeout, f"job {job_id} to end", every=0)
