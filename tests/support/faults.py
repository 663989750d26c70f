"""Helpers of the fault tests (test_faults, test_slow_clients, test_shutdown): the routes,
error bodies that must say what went wrong, what a data dir holds, a server still serving."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import httpx

from asrserve.bench.corpus import Clip
from tests.support.servers import Server
from tests.support.wait import wait_until

MIB = 1024 * 1024
SYNC = "/v1/audio/transcriptions"
JOBS = "/v1/jobs"
FILES = "/v1/files"
SHORT_CLIPS = ("clip_09.m4a", "clip_00.wav", "clip_05.wav")


class Answer(Protocol):
    """A response from httpx or from the TestClient (which may use its own httpx copy)."""

    @property
    def status_code(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    def json(self) -> Any: ...


def assert_error(resp: Answer, status: int, code: str) -> dict[str, Any]:
    """An OpenAI-shaped error with this status and code and a usable message."""
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and len(error["message"]) > 20, error
    return error


def assert_retry_after(resp: Answer) -> int:
    retry = resp.headers.get("retry-after", "")
    assert retry.isdigit() and int(retry) >= 1, dict(resp.headers)
    return int(retry)


def upload_files(clip: Clip) -> dict[str, tuple[str, bytes]]:
    return {"file": (clip.path.name, clip.path.read_bytes())}


def healthy(srv: Server, client: httpx.Client) -> None:
    assert srv.proc is not None and srv.proc.poll() is None, srv.log()
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get(JOBS).status_code == 200


def uploads_receiving(client: httpx.Client, headers: Mapping[str, str] | None = None) -> int:
    """The server's ``asrserve_uploads_receiving`` gauge (``/metrics``): how many uploads hold a
    slot of its gate. Read without taking one, as a probing upload would."""
    metrics = client.get("/metrics", headers=headers)
    assert metrics.status_code == 200, metrics.text
    found = re.search(r"^asrserve_uploads_receiving (\S+)$", metrics.text, re.MULTILINE)
    assert found is not None, metrics.text
    return int(float(found.group(1)))


def listing(data_dir: Path) -> set[str]:
    return {
        f"{sub}/{name}"
        for sub in ("audio", "files")
        if (data_dir / sub).exists()
        for name in os.listdir(data_dir / sub)
    }


def wait_running(client: httpx.Client, job_id: str) -> None:
    def running() -> bool:
        return bool(client.get(f"{JOBS}/{job_id}").json()["status"] == "running")

    wait_until(running, 60, f"{job_id} to start", every=0.05)
