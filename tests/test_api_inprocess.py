"""The jobs API, deadlines, webhooks and the service's discovery endpoints, asked of the app in
this process (``tests/support/inprocess.py``): the stores, uploads, decoding, VAD and the
scheduler are real, the forward pass a :class:`FakeEngine` that decodes a window to its length
in seconds and whose ``gate`` holds the device busy where a test needs work to wait.

Covers the official ``openai`` client's JSON answer, a job's transcript in each format, job
listing (paging, filtering), cancelling a queued job, a synchronous deadline that passes before
the device starts the work (504, the chunk dropped, never run), a webhook retried then delivered
(to a real receiver on a loopback socket, signed), unknown jobs, models, health and docs. What
needs the real model (accuracy, in every response format) is in ``tests/test_api_e2e.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from asrserve.bench.corpus import Clip
from tests.support.api import submit_job, wait_job
from tests.support.fakes import FakeEngine
from tests.support.inprocess import URL, InProcess, in_process
from tests.support.servers import Receiver
from tests.support.signatures import verifies
from tests.support.subtitles import check_cues, parse_srt, parse_vtt
from tests.support.wait import wait_until

# --- helpers ------------------------------------------------------------------------------


def assert_openai_error(response: httpx2.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and error["type"]
    return dict(error)


def decoded(engine: FakeEngine) -> str:
    """The text the fake decoded, window by window in the order run: each window's length."""
    return "".join(f" {duration}" for batch in engine.batches for duration in batch).strip()


def client_for(app: InProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{URL}/v1", api_key="x", max_retries=0, http_client=app.client)


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    """One app for the tests that only read what needs no job."""
    with in_process(tmp_path_factory.mktemp("api-inprocess") / "data") as app:
        yield app


# --- 1. the official OpenAI client's JSON answer ----------------------------------------------


def test_openai_json(short_clip: Clip, tmp_path: Path) -> None:
    with in_process(tmp_path / "data") as app, short_clip.path.open("rb") as audio:
        result = client_for(app).audio.transcriptions.create(
            model="whisper-1", file=audio, response_format="json"
        )
        (engine,) = app.engines
    assert isinstance(result, openai.types.audio.Transcription)
    assert result.text == decoded(engine) and result.text, result.text


# --- 2. the jobs API --------------------------------------------------------------------------


def test_job_transcript_formats(short_clip: Clip, tmp_path: Path) -> None:
    with in_process(tmp_path / "data") as app:
        http = app.client
        job = wait_job(http, submit_job(http, short_clip.path)["id"])
        assert job["status"] == "succeeded", job
        url = f"/v1/jobs/{job['id']}/transcript"
        text = job["result"]["text"]

        srt = http.get(url, params={"format": "srt"})
        assert srt.status_code == 200
        assert srt.headers["content-type"].startswith("application/x-subrip")
        check_cues(parse_srt(srt.text), short_clip.duration)
        vtt = http.get(url, params={"format": "vtt"})
        assert vtt.status_code == 200 and vtt.headers["content-type"].startswith("text/vtt")
        check_cues(parse_vtt(vtt.text), short_clip.duration)
        plain = http.get(url, params={"format": "text"})
        assert plain.status_code == 200 and plain.headers["content-type"].startswith("text/plain")
        assert plain.text.strip() == text
        assert http.get(url, params={"format": "json"}).json() == {"text": text}
        assert http.get(url).json() == {"text": text}
        verbose = http.get(url, params={"format": "verbose_json"}).json()
        assert verbose == job["result"]
        assert verbose["segments"] and "words" not in verbose
        assert_openai_error(http.get(url, params={"format": "docx"}), 422)


def test_job_listing(corpus: list[Clip], tmp_path: Path) -> None:
    with in_process(tmp_path / "data") as app:
        http = app.client
        ids = [submit_job(http, clip.path)["id"] for clip in corpus[:2]]
        for job_id in ids:
            assert wait_job(http, job_id)["status"] == "succeeded"
        newest_first = sorted(ids, reverse=True)

        first = http.get("/v1/jobs", params={"limit": 1}).json()
        assert first["object"] == "list" and len(first["data"]) == 1
        assert first["has_more"] is True
        assert first["first_id"] == first["last_id"] == first["data"][0]["id"] == newest_first[0]
        second = http.get("/v1/jobs", params={"limit": 1, "after": first["last_id"]}).json()
        assert [j["id"] for j in second["data"]] == [newest_first[1]]

        seen: list[str] = []
        after: str | None = None
        while True:  # walk every page: ids strictly decreasing, nothing repeated
            params: dict[str, Any] = {"limit": 7, **({"after": after} if after else {})}
            page = http.get("/v1/jobs", params=params).json()
            seen += [j["id"] for j in page["data"]]
            if not page["has_more"]:
                break
            after = page["last_id"]
        assert seen == sorted(set(seen), reverse=True)
        assert set(ids) <= set(seen)

        succeeded = http.get("/v1/jobs", params={"status": "succeeded", "limit": 100}).json()
        assert succeeded["data"] and all(j["status"] == "succeeded" for j in succeeded["data"])
        assert set(ids) <= {j["id"] for j in succeeded["data"]}
        failed = http.get("/v1/jobs", params={"status": "failed", "limit": 100}).json()
        assert not set(ids) & {j["id"] for j in failed["data"]}
        assert_openai_error(http.get("/v1/jobs", params={"status": "bogus"}), 422)
        assert_openai_error(http.get("/v1/jobs", params={"limit": 0}), 422)


def test_cancel_queued_job(corpus: list[Clip], long_clip: Clip, tmp_path: Path) -> None:
    with in_process(tmp_path / "data") as app:
        http = app.client
        (engine,) = app.engines
        engine.gate.clear()  # the device holds the first job's window: the later jobs wait
        others = [submit_job(http, long_clip.path)["id"]]
        assert engine.entered.wait(10), "the first job never reached the device"
        others += [submit_job(http, long_clip.path)["id"]]
        others += [submit_job(http, clip.path)["id"] for clip in corpus[:3]]
        last = submit_job(http, corpus[3].path)["id"]
        response = http.delete(f"/v1/jobs/{last}")
        assert response.status_code == 200, response.text
        cancelled = response.json()
        assert cancelled["status"] == "cancelled", cancelled
        assert cancelled["result"] is None and cancelled["finished_at"] is not None
        engine.gate.set()

        for job_id in others:
            assert wait_job(http, job_id, wait=60)["status"] == "succeeded", job_id
        after = http.get(f"/v1/jobs/{last}", params={"wait": 1}).json()
        assert after["status"] == "cancelled" and after["result"] is None, after
        assert after["finished_at"] == cancelled["finished_at"]
        again = http.delete(f"/v1/jobs/{last}").json()
        assert again["status"] == "cancelled"
        error = assert_openai_error(http.get(f"/v1/jobs/{last}/transcript"), 409)
        assert error["code"] == "job_cancelled"
        listed = http.get("/v1/jobs", params={"status": "cancelled", "limit": 100}).json()
        assert last in {j["id"] for j in listed["data"]}


def test_sync_deadline_is_504_and_the_chunk_never_runs(
    long_clip: Clip, short_clip: Clip, tmp_path: Path
) -> None:
    """A sync request whose deadline passes before a device starts its chunk gets 504
    ``deadline_exceeded``; the chunk is dropped, never run (the scheduler's dropped count
    moves by one, and no window of its length reaches the engine), and the service keeps
    serving. The device is held on another job's window meanwhile; the deadline (1 ms)
    passes while the upload is still being decoded, so no device, idle or not, could start
    it in time."""
    with in_process(tmp_path / "data") as app:
        http = app.client
        (engine,) = app.engines
        engine.gate.clear()
        busy = submit_job(http, long_clip.path)["id"]  # work pending beside the late chunk
        assert engine.entered.wait(10), "the busy job never reached the device"
        before = http.get("/v1/scheduler").json()
        with short_clip.path.open("rb") as audio:
            late = http.post(
                "/v1/audio/transcriptions",
                files={"file": (short_clip.path.name, audio)},
                data={"deadline_s": "0.001"},
            )
        assert assert_openai_error(late, 504)["code"] == "deadline_exceeded"
        engine.gate.set()
        assert wait_job(http, busy, wait=60)["status"] == "succeeded"
        (newest,) = http.get("/v1/jobs", params={"limit": 1}).json()["data"]
        assert (newest["filename"], newest["priority"]) == (short_clip.path.name, "interactive")
        assert wait_job(http, newest["id"])["status"] == "failed"  # its chunk dropped
        after = http.get("/v1/scheduler").json()
        assert after["dropped"] == before["dropped"] + 1
        ran = [duration for batch in engine.batches for duration in batch]
        assert all(abs(duration - short_clip.duration) > 0.1 for duration in ran), ran
        with short_clip.path.open("rb") as audio:  # the service keeps serving
            fine = http.post("/v1/audio/transcriptions", files={"file": audio})
        assert fine.status_code == 200 and fine.json()["text"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/jobs/job_doesnotexist"),
        ("DELETE", "/v1/jobs/job_doesnotexist"),
        ("GET", "/v1/jobs/job_doesnotexist/transcript"),
    ],
)
def test_unknown_job_404(shared: InProcess, method: str, path: str) -> None:
    error = assert_openai_error(shared.client.request(method, path), 404)
    assert error["type"] == "not_found_error"
    assert error["code"] == "job_not_found" and error["param"] == "job_id"
    assert "job_doesnotexist" in error["message"]


# --- 3. webhooks -----------------------------------------------------------------------------


def test_webhook_retried_then_delivered(
    tmp_path: Path, receiver: tuple[Receiver, str], short_clip: Clip
) -> None:
    record, hook_url = receiver
    env = {"ASRSERVE_WEBHOOK_BACKOFF_S": "0.2", "ASRSERVE_WEBHOOK_ALLOW": "127.0.0.1"}
    with in_process(tmp_path / "data", env) as app:
        client = app.client
        secret = client.get("/v1/webhooks/secret").json()["secret"]
        assert secret.startswith("whsec_")
        sent_after = time.time()
        job = submit_job(client, short_clip.path, callback_url=hook_url)
        assert job["webhook"] == {
            "url": hook_url,
            "status": None,
            "attempts": 0,
            "last_error": None,
        }
        delivered = wait_until(
            record.answered_ok, 60, lambda: f"a webhook answered 200: {record.calls}", every=0.1
        )
        _, headers, body = delivered[0]
        payload = json.loads(body)
        assert payload["id"] == job["id"] and payload["status"] == "succeeded", payload
        assert payload["result"]["text"].strip()
        (engine,) = app.engines
        assert payload["result"]["text"] == decoded(engine)  # the transcript, as decoded
        assert headers.get("X-Asrserve-Event") == "job.succeeded"
        assert headers.get("Content-Type", "").startswith("application/json")

        def recorded() -> dict[str, Any] | None:  # the attempt is stored right after the 200
            final: dict[str, Any] = client.get(f"/v1/jobs/{job['id']}").json()
            return None if final["webhook"]["status"] == "pending" else final

        final = wait_until(recorded, 10, "the delivery to be recorded", every=0.05)
    assert final["webhook"]["status"] == "delivered", final["webhook"]
    assert final["webhook"]["attempts"] == 2, final["webhook"]
    assert final["webhook"]["last_error"] is None
    assert len(record.calls) == 2 and record.calls[0][0] == 500
    assert json.loads(record.calls[0][2])["id"] == job["id"]
    # both attempts signed with the caller's secret, one message id for both; the signature
    # covers the body as sent
    for _, headers, body in record.calls:
        assert headers.get("webhook-id") == job["id"]
        assert verifies(secret, headers, body), dict(headers)
        assert sent_after - 1 <= int(headers["webhook-timestamp"]) <= time.time() + 1
    _, headers, body = record.calls[1]
    assert not verifies(secret, headers, body.replace(b"succeeded", b"failed"))


# --- 4. discovery and health -------------------------------------------------------------------


def test_models(shared: InProcess) -> None:
    http = shared.client
    body = http.get("/v1/models").json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["tiny.en"]
    assert [m.id for m in client_for(shared).models.list()] == ["tiny.en"]
    assert http.get("/v1/models/whisper-1").json()["id"] == "tiny.en"
    assert http.get("/v1/models/tiny.en").status_code == 200
    error = assert_openai_error(http.get("/v1/models/gpt-5"), 404)
    assert error["code"] == "model_not_found"


def test_health_and_docs(shared: InProcess) -> None:
    http = shared.client
    assert http.get("/healthz").json() == {"status": "ok"}
    assert http.get("/readyz").json() == {"status": "ready"}
    docs = http.get("/docs")
    assert docs.status_code == 200 and "html" in docs.headers["content-type"]
    spec = http.get("/openapi.json")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    assert "/v1/audio/transcriptions" in paths
    assert "/v1/jobs" in paths and "/v1/jobs/{job_id}" in paths
    form = paths["/v1/audio/transcriptions"]["post"]["requestBody"]["content"]
    assert "file" in form["multipart/form-data"]["schema"]["properties"]
