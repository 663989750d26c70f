"""A client that closes its connection before its transcript is ready (it gave up, its own
timeout passed) has its job cancelled, as ``DELETE /v1/jobs/{id}`` would: ten minutes of
speech are not decoded for nobody. Real server, real model, a real socket closed mid-job,
on the synchronous route and on ``stream=true``."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from asrserve.audio.decode import decode
from tests.support.payloads import opus
from tests.support.raw_http import BOUNDARY
from tests.support.servers import JFK, Server
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow
REPEATS = 55  # jfk (11 s) 55 times: 10 min, far longer than the test takes to close


@pytest.fixture(scope="module")
def long_speech() -> bytes:
    """Ten minutes of real speech as Opus in Ogg (a few MB, under the sync upload limit)."""
    return opus(np.tile(decode(JFK, 60.0), REPEATS), "ogg")


def _send(port: int, audio: bytes, filename: str, fields: dict[str, str]) -> socket.socket:
    """The whole request, sent; the socket left open for its answer."""
    parts = [
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in {"model": "whisper-1", **fields}.items()
    ]
    head = "".join(parts) + (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="{filename}"\r\nContent-Type: audio/ogg\r\n\r\n'
    )
    body = head.encode() + audio + f"\r\n--{BOUNDARY}--\r\n".encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(
        (
            "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
    )
    return sock


def _job_named(client: httpx.Client, filename: str) -> dict[str, Any] | None:
    jobs = client.get("/v1/jobs", params={"limit": 100}).json()["data"]
    return next((job for job in jobs if job["filename"] == filename), None)


def _ended(client: httpx.Client, filename: str) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        job = _job_named(client, filename)
        return job if job is not None and job["status"] not in ("queued", "running") else None

    return wait_until(finished, 300, f"the job of {filename} to end")


@pytest.mark.parametrize("stream", [False, True], ids=["sync", "stream"])
def test_a_client_gone_before_its_transcript_cancels_its_job(
    server: Server, long_speech: bytes, stream: bool, tmp_path: Path
) -> None:
    filename = f"gone-{'stream' if stream else 'sync'}-{tmp_path.name}.ogg"
    fields = {"stream": "true"} if stream else {}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        sock = _send(server.port, long_speech, filename, fields)
        with sock:
            if stream:  # accepted: the 200 and its headers come before any text
                assert sock.recv(12) == b"HTTP/1.1 200", "the stream was not accepted"
            wait_until(lambda: _job_named(client, filename), 60, f"a job for {filename}")
        job = _ended(client, filename)
        assert job["status"] == "cancelled", job
        progress = job["progress"]
        assert progress is None or progress["chunks_done"] < progress["chunks_total"], job
        assert client.get("/healthz").json() == {"status": "ok"}
