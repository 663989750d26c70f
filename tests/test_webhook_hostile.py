"""Hostile callback URLs and callback receivers (security review #13).

A malformed callback is refused at intake with nothing kept; one stored by an older version
fails alone at delivery while the duties go on; a receiver that answers slowly (a huge body,
one byte at a time) stalls no other delivery and is cut off at the deadline; a name that
resolves to a private address is refused without saying what it resolved to.

The service runs in this process (``tests/support/inprocess.py``: the stores and the webhook
sender real, the forward pass a fake), with a short delivery deadline; the receivers are
real HTTP servers on loopback sockets, so every delivery crosses the network stack.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.testclient import TestClient

from asrserve.bench.corpus import Clip
from asrserve.drivers.sqlite import Database
from asrserve.jobs.models import Job, JobError, JobStatus, WebhookStatus, new_job_id
from asrserve.jobs.sqlite import SqliteJobStore
from tests.support.inprocess import in_process
from tests.support.wait import wait_until

TIMEOUT_S = (
    2  # ASRSERVE_WEBHOOK_TIMEOUT_S: one delivery, all told (the other webhook has that long)
)
HOSTILE = {
    "ASRSERVE_WEBHOOK_ALLOW": "127.0.0.1",  # the receivers here listen on loopback
    "ASRSERVE_WEBHOOK_TIMEOUT_S": str(TIMEOUT_S),
    "ASRSERVE_WEBHOOK_BACKOFF_S": "600",  # no retry within a test
}
# What older versions accepted, and what each delivery of it now records.
MALFORMED = {
    "http://example.com:99999/": "invalid callback URL: the URL cannot be parsed (host or port)",
    "http://a..b/": "invalid callback URL: the host is not a valid domain name",
    "http://[::1": "invalid callback URL: the URL cannot be parsed (host or port)",
    "http://[evil]/": "invalid callback URL: the URL cannot be parsed (host or port)",
}


@pytest.fixture(scope="module")
def clip(corpus: list[Clip]) -> Clip:
    return min(corpus[:-1], key=lambda c: c.duration)


@dataclass
class Hook:
    """A callback receiver on loopback. ``drip``: it answers 200 with a 100 MB body and
    sends it one byte at a time until the caller hangs up."""

    drip: bool = False
    url: str = ""
    received: threading.Event = field(default_factory=threading.Event)
    hung_up: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        handler.rfile.read(int(handler.headers.get("content-length", "0")))
        self.received.set()
        handler.send_response(200)
        handler.send_header("content-length", str(100_000_000 if self.drip else 0))
        handler.end_headers()
        handler.wfile.flush()
        try:
            while self.drip and not self.stop.wait(0.2):  # the receiver's pace, not a sync
                handler.wfile.write(b"x")
                handler.wfile.flush()
        except OSError:
            self.hung_up.set()


@contextlib.contextmanager
def hook(*, drip: bool = False) -> Iterator[Hook]:
    receiver = Hook(drip)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            receiver.answer(self)

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def post_job(http: TestClient, clip: Clip, callback_url: str) -> httpx2.Response:
    with clip.path.open("rb") as audio:
        return http.post(
            "/v1/jobs",
            files={"file": (clip.path.name, audio)},
            data={"callback_url": callback_url},
        )


def post_batch(http: TestClient, callback_url: str) -> httpx2.Response:
    body = {
        "input_file_id": "file-x",
        "endpoint": "/v1/audio/transcriptions",
        "completion_window": "24h",
        "metadata": {"callback_url": callback_url},
    }
    return http.post("/v1/batches", json=body)


def refusal(response: httpx2.Response) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["code"], error["param"]


def webhook_when(
    http: TestClient, job_id: str, done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The job's webhook state once ``done`` says so."""

    def reached() -> dict[str, Any] | None:
        webhook: dict[str, Any] = http.get(f"/v1/jobs/{job_id}").json()["webhook"]
        return webhook if done(webhook) else None

    return wait_until(reached, 120, f"the webhook of {job_id}", every=0.05)


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def store_owed(data_dir: Path, urls: list[str]) -> list[str]:
    """Finished jobs whose webhooks are owed to ``urls``, as an older version stored them
    (intake refuses those URLs now); their ids, in the same order."""
    jobs = [
        Job(
            id=new_job_id(),
            status=JobStatus.FAILED,
            error=JobError(status=500, code="test", message="stored by the test"),
            finished_at=time.time(),
            callback_url=url,
            webhook_status=WebhookStatus.PENDING,
        )
        for url in urls
    ]
    data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(data_dir / "asrserve.db")
    try:
        store = SqliteJobStore(db)
        for job in jobs:
            asyncio.run(store.create(job))
    finally:
        db.close()
    return [job.id for job in jobs]


def test_bad_callbacks_are_refused_with_nothing_kept(tmp_path: Path, clip: Clip) -> None:
    data = tmp_path / "data"
    with in_process(data, HOSTILE) as app:
        http = app.client
        audio = data / "audio"
        before = files_under(audio)
        for url in MALFORMED:
            refused = post_job(http, clip, url)
            assert refusal(refused) == (400, "invalid_callback_url", "callback_url"), url
            batch = post_batch(http, url)
            assert refusal(batch) == (400, "invalid_callback_url", "metadata.callback_url"), url
        nat64_loopback = "http://[64:ff9b::127.0.0.1]/hook"
        refused = post_job(http, clip, nat64_loopback)
        assert refusal(refused) == (400, "callback_not_allowed", "callback_url")
        batch = post_batch(http, nat64_loopback)
        assert refusal(batch) == (400, "callback_not_allowed", "metadata.callback_url")
        assert files_under(audio) == before


def test_a_poisoned_webhook_fails_alone_and_the_duties_go_on(
    tmp_path: Path, clip: Clip, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    poisoned = dict(zip(store_owed(data, list(MALFORMED)), MALFORMED.values(), strict=True))
    with caplog.at_level(logging.INFO), in_process(data, HOSTILE) as app, hook() as good:
        http = app.client
        job = post_job(http, clip, good.url).json()
        assert good.received.wait(120), "the good webhook was never delivered"
        delivered = webhook_when(http, job["id"], lambda w: w["status"] != "pending")
        assert delivered == {
            "url": good.url,
            "status": "delivered",
            "attempts": 1,
            "last_error": None,
        }
        for job_id, error in poisoned.items():
            webhook = webhook_when(http, job_id, lambda w: w["status"] != "pending")
            assert (webhook["status"], webhook["attempts"], webhook["last_error"]) == (
                "failed",
                1,
                error,
            )
    assert "the duties failed" not in caplog.text
    assert "duty failed" not in caplog.text  # what a failing duty logs: "the webhooks duty ..."


def test_a_slow_huge_answer_stalls_no_other_webhook(tmp_path: Path, clip: Clip) -> None:
    with in_process(tmp_path / "data", HOSTILE) as app, hook(drip=True) as slow, hook() as good:
        http = app.client
        first = post_job(http, clip, slow.url).json()
        assert slow.received.wait(120), "the slow receiver was never called"
        second = post_job(http, clip, good.url).json()
        assert good.received.wait(120), "the good webhook waited behind the slow one"
        assert not slow.hung_up.is_set()  # delivered while the slow one was still going
        stalled = webhook_when(http, first["id"], lambda w: w["attempts"] > 0)
        assert slow.hung_up.wait(10), "the sender never hung up on the slow receiver"
        assert stalled == {
            "url": slow.url,
            "status": "pending",  # retried later (after the back-off)
            "attempts": 1,
            "last_error": f"no answer within {TIMEOUT_S} s",
        }
        delivered = webhook_when(http, second["id"], lambda w: w["status"] != "pending")
        assert (delivered["status"], delivered["attempts"]) == ("delivered", 1)


def test_a_blocked_name_is_recorded_without_its_address(tmp_path: Path) -> None:
    """A name that resolves to a private address (here ``localhost``, stored by an older
    version: intake refuses it now) is refused at delivery, and the tenant is not told what
    it resolved to (that made the service a DNS oracle for the internal network)."""
    data = tmp_path / "data"
    (job_id,) = store_owed(data, ["http://localhost:9/hook"])
    with in_process(data) as app:  # no allow-list: loopback is refused
        webhook = webhook_when(app.client, job_id, lambda w: w["status"] != "pending")
    assert webhook["status"] == "failed"
    assert webhook["last_error"] == "blocked: the callback host is not a public address"
