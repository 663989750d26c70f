"""API keys, tenant isolation, limits and callback safety.

Keys are made with the ``asrserve keys`` command in the data dir. What is about a process
starts one: the command as a user runs it (it creates a key; the rest of that test runs the
command's ``main`` here), and a public interface refusing to start without keys. The rest is
HTTP semantics, asked of the app in this process with a fake engine
(``tests/support/inprocess.py``), the stores, uploads and live sessions real,
``ASRSERVE_AUTH=on``, its keys made by the command run in this process too.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from asrserve.bench.corpus import Clip
from asrserve.cli.main import main
from asrserve.cli.server_process import free_port
from tests.support.inprocess import URL, WS, in_process
from tests.support.keys import auth, new_key, new_key_here
from tests.support.wait import wait_until

SYNC = "/v1/audio/transcriptions"


@pytest.fixture(scope="module")
def short(corpus: list[Clip]) -> Clip:
    return min(corpus, key=lambda clip: clip.duration)


def post_job(http: TestClient, clip: Clip, secret: str, **data: str) -> httpx2.Response:
    with clip.path.open("rb") as handle:
        return http.post("/v1/jobs", files={"file": handle}, data=data, headers=auth(secret))


def keys_here(data: Path, *args: str) -> tuple[int, str]:
    """``asrserve keys ARGS --data-dir DATA`` run in this process: its exit status (what
    ``python -m asrserve.cli`` exits with) and what it printed. The command sets its own
    umask; this process's is put back after it."""
    out = io.StringIO()
    umask = os.umask(0o077)
    os.umask(umask)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(["keys", *args, "--data-dir", str(data)])
    finally:
        os.umask(umask)
    return code, out.getvalue()


@pytest.mark.slow
def test_keys_command_stores_only_a_hash(tmp_path: Path) -> None:
    data = tmp_path / "data"
    secret = new_key(data, "alice", "--rpm", "5")  # the command as a process of its own
    assert secret.startswith("asr_") and len(secret) > 40
    listed = keys_here(data, "list")[1]
    assert "alice" in listed and secret not in listed and secret[:10] in listed
    with contextlib.closing(sqlite3.connect(data / "asrserve.db")) as conn:
        dump = "\n".join(conn.iterdump())
    assert secret not in dump
    assert keys_here(data, "create", "--name", "alice")[0] == 2  # names are unique
    assert keys_here(data, "revoke", "alice")[0] == 0
    assert keys_here(data, "revoke", "alice")[0] == 1  # nothing active left by that name
    assert "revoked" in keys_here(data, "list")[1].splitlines()[0]


@pytest.mark.slow
def test_public_interface_with_auth_and_no_keys_refuses_to_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    command = [sys.executable, "-m", "asrserve.cli", "serve", "--host", "0.0.0.0"]
    command += ["--port", str(free_port()), "--data-dir", str(data)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "no API keys" in done.stderr and "asrserve keys create" in done.stderr


def test_tenants_see_only_their_own_work(short: Clip, tmp_path: Path) -> None:
    data = tmp_path / "data"
    alice, bob = new_key_here(data, "alice"), new_key_here(data, "bob")
    admin = new_key_here(data, "ops", "--admin")
    revoked = new_key_here(data, "old")
    assert keys_here(data, "revoke", "old")[0] == 0
    with in_process(data, {"ASRSERVE_AUTH": "on"}) as app:
        http = app.client
        for path in ("/v1/jobs", "/v1/files", "/v1/batches", "/v1/models", "/metrics"):
            for headers in ({}, auth("asr_wrong"), auth(revoked), {"Authorization": alice}):
                response = http.get(path, headers=headers)
                assert response.status_code == 401, (path, headers)
                assert response.json()["error"]["code"] == "invalid_api_key"
        for path in ("/v1/audio/translations", "/asr", "/detect-language"):  # before any byte
            denied = http.post(path, files={"audio_file": ("a.wav", b"RIFF")})
            assert denied.status_code == 401, path
        assert http.get("/healthz").status_code == 200

        job = post_job(http, short, alice).json()
        done = http.get(f"/v1/jobs/{job['id']}", params={"wait": 60}, headers=auth(alice))
        assert done.json()["status"] == "succeeded"
        for method, path in [
            ("GET", f"/v1/jobs/{job['id']}"),
            ("GET", f"/v1/jobs/{job['id']}/transcript"),
            ("DELETE", f"/v1/jobs/{job['id']}"),
            ("GET", f"/v1/jobs/{job['id']}/events"),
        ]:
            denied = http.request(method, path, headers=auth(bob))
            assert denied.status_code == 404 and denied.json()["error"]["code"] == "job_not_found"
        assert http.get("/v1/jobs", headers=auth(bob)).json()["data"] == []
        mine = http.get("/v1/jobs", headers=auth(alice)).json()["data"]
        assert [j["id"] for j in mine] == [job["id"]]
        everyone = http.get("/v1/jobs", headers=auth(admin)).json()["data"]
        assert job["id"] in [j["id"] for j in everyone]
        assert http.get(f"/v1/jobs/{job['id']}", headers=auth(admin)).status_code == 200

        with short.path.open("rb") as handle:
            audio = http.post(
                "/v1/files", files={"file": handle}, data={"purpose": "audio"}, headers=auth(alice)
            ).json()
        for method, path in [
            ("GET", f"/v1/files/{audio['id']}"),
            ("GET", f"/v1/files/{audio['id']}/content"),
            ("DELETE", f"/v1/files/{audio['id']}"),
        ]:
            assert http.request(method, path, headers=auth(bob)).status_code == 404
        assert http.get("/v1/files", headers=auth(bob)).json()["data"] == []
        assert "owner" not in audio

        # bob names alice's audio in his own batch: his request fails as if it did not exist
        line = {"custom_id": "x", "method": "POST", "url": SYNC, "body": {"file": audio["id"]}}
        requests = http.post(
            "/v1/files",
            files={"file": ("in.jsonl", json.dumps(line) + "\n")},
            data={"purpose": "batch"},
            headers=auth(bob),
        ).json()
        body = {"input_file_id": requests["id"], "endpoint": SYNC, "completion_window": "24h"}
        stolen = http.post("/v1/batches", json=body, headers=auth(alice))
        assert stolen.status_code == 404  # alice cannot use bob's input file either
        batch = http.post("/v1/batches", json=body, headers=auth(bob)).json()
        assert http.get(f"/v1/batches/{batch['id']}", headers=auth(alice)).status_code == 404
        assert http.get("/v1/batches", headers=auth(alice)).json()["data"] == []

        def ended() -> dict[str, Any] | None:
            now: dict[str, Any] = http.get(f"/v1/batches/{batch['id']}", headers=auth(bob)).json()
            return now if now["status"] in ("completed", "failed") else None

        batch = wait_until(ended, 60, "the batch to end")
        assert batch["request_counts"] == {"total": 1, "completed": 0, "failed": 1}
        errors = http.get(f"/v1/files/{batch['error_file_id']}/content", headers=auth(bob))
        assert json.loads(errors.text)["response"]["status_code"] == 404
        theirs = http.get(f"/v1/files/{batch['error_file_id']}/content", headers=auth(alice))
        assert theirs.status_code == 404

        for path in ("/metrics", "/v1/scheduler", "/v1/dashboard/stats"):
            assert http.get(path, headers=auth(alice)).status_code == 403
            assert http.get(path, headers=auth(admin)).status_code == 200

        # live sessions: the key in the Authorization header or as OpenAI's key subprotocol
        live = WS + "/v1/realtime?intent=transcription"
        with http.websocket_connect(live) as ws:
            assert ws.receive_json()["error"]["code"] == "invalid_api_key"
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_json()
            assert closed.value.code == 1008
        with http.websocket_connect(live, headers=auth(alice)) as ws:
            assert ws.receive_json()["type"] == "session.created"
        protocols = ["realtime", f"openai-insecure-api-key.{bob}"]
        with http.websocket_connect(live, subprotocols=protocols) as ws:
            assert ws.receive_json()["type"] == "session.created"
            assert ws.accepted_subprotocol == "realtime"

        client = openai.OpenAI(base_url=f"{URL}/v1", api_key=alice, max_retries=0, http_client=http)
        with short.path.open("rb") as handle:
            text = client.audio.transcriptions.create(model="whisper-1", file=handle).text
        assert text.strip()
        stranger = openai.OpenAI(
            base_url=f"{URL}/v1", api_key="asr_nope", max_retries=0, http_client=http
        )
        with pytest.raises(openai.AuthenticationError):
            stranger.models.list()


def test_rate_limit_quota_and_queue_limits(corpus: list[Clip], short: Clip, tmp_path: Path) -> None:
    data = tmp_path / "data"
    slow = new_key_here(data, "slow", "--rpm", "3")
    small = new_key_here(
        data, "small", "--audio-minutes-per-day", str(round(short.duration * 1.5 / 60, 4))
    )
    busy = new_key_here(data, "busy")
    # The class's limit, not a key's share of it (tests/test_admission_shares.py)
    env = {"ASRSERVE_AUTH": "on", "ASRSERVE_MAX_QUEUED_JOBS": "2", "ASRSERVE_MAX_QUEUED_SHARE": "1"}
    with in_process(data, env) as app:
        http = app.client
        statuses = [http.get("/v1/jobs", headers=auth(slow)) for _ in range(4)]
        assert [r.status_code for r in statuses] == [200, 200, 200, 429]
        limited = statuses[-1]
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"
        assert 1 <= int(limited.headers["Retry-After"]) <= 20
        assert limited.headers["X-RateLimit-Limit-Requests"] == "3"
        assert statuses[0].headers["X-RateLimit-Remaining-Requests"] == "2"

        first = post_job(http, short, small)
        assert first.status_code == 202
        over = post_job(http, short, small)
        assert over.status_code == 429 and over.json()["error"]["code"] == "quota_exceeded"
        assert 0 < int(over.headers["Retry-After"]) <= 86400
        waited = http.get(
            f"/v1/jobs/{first.json()['id']}", params={"wait": 60}, headers=auth(small)
        )
        assert waited.json()["status"] == "succeeded"

        (engine,) = app.engines
        engine.gate.clear()  # the device holds the first job: the class's two places fill
        long_clips = sorted(corpus, key=lambda clip: -clip.duration)[:4]
        answers = [post_job(http, clip, busy) for clip in long_clips]
        assert [answer.status_code for answer in answers] == [202, 202, 429, 429]
        full = answers[2]
        assert full.json()["error"]["code"] == "queue_full"
        assert int(full.headers["Retry-After"]) >= 1
        accepted = {a.json()["id"] for a in answers if a.status_code == 202}
        stored = {path.name for path in (data / "audio").iterdir()}
        assert len(stored) == 1 + len(accepted)  # rejected uploads (quota, queue) leave no file
        engine.gate.set()
        for job_id in accepted:
            job = http.get(f"/v1/jobs/{job_id}", params={"wait": 60}, headers=auth(busy))
            assert job.json()["status"] == "succeeded"
        assert post_job(http, long_clips[-1], busy).status_code == 202  # room again


def test_callbacks_to_private_addresses_are_refused(short: Clip, tmp_path: Path) -> None:
    with in_process(tmp_path / "data") as app:
        http = app.client
        for target in (
            "http://10.0.0.7/hook",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]:8000/hook",
            "http://localhost:8000/hook",
        ):
            refused = post_job(http, short, "unused", callback_url=target)
            assert refused.status_code == 400, target
            error: dict[str, Any] = refused.json()["error"]
            assert error["param"] == "callback_url" and error["code"] == "callback_not_allowed"
        body = {
            "input_file_id": "file-x",
            "endpoint": SYNC,
            "completion_window": "24h",
            "metadata": {"callback_url": "http://192.168.1.1/x"},
        }
        refused_batch = http.post("/v1/batches", json=body)
        assert refused_batch.status_code == 400
        assert refused_batch.json()["error"]["param"] == "metadata.callback_url"
