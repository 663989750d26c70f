"""One HTTP contract, two deployments: the embedded server (SQLite, one process) and the
distributed mode (redis-server, an API node and a worker node as separate processes).

Each test runs against both and expects the same answers: the sync endpoint, async jobs
with long-polling, cancellation (queued and running), webhooks, the Batch API, priorities,
API keys (made by the ``asrserve keys`` command's code) and tenant isolation.

The distributed deployment is real: its processes, Redis and the real model, with the
real model's text checked by WER. The embedded deployment's claims here are HTTP and queue
semantics, so it is the app in this process (``tests/support/inprocess.py``: SQLite
stores, uploads, decode, VAD and scheduler real) with a fake engine, whose forward passes a
:class:`~tests.support.turnstile.Turnstile` holds where the real model's long clip kept the
device busy: a running job to cancel, an async backlog for an interactive request to go
ahead of. Its text is the fake's, so the WER checks are the distributed run's. The real
model's text behind a real embedded server: ``test_api_e2e.py`` (``test_openai_verbose_json``
and ``test_job_lifecycle``: WER <= 0.25, the duration), ``test_translation_routes.py`` (jfk.flac
at WER <= 0.1) and ``test_batch_cli.py::test_against_a_server_writes_txt_into_out`` (the
Batch API).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest

from asrserve.bench.corpus import Clip
from asrserve.bench.redis_process import RedisProcess
from asrserve.bench.wer import wer_one
from asrserve.cli.server_process import free_port
from asrserve.vocabulary import Priority
from tests.support.api import job_status, submit_job, transcribe, wait_job
from tests.support.batches import ENDPOINT, create_batch, line, upload_audio
from tests.support.cluster import Cluster
from tests.support.inprocess import URL, in_process
from tests.support.keys import create_here
from tests.support.servers import JFK, REAL_SPEECH, Receiver
from tests.support.turnstile import Turnstile
from tests.support.wait import wait_until

slow = pytest.mark.slow

TIMEOUT = httpx2.Timeout(120.0, connect=10.0)
ENV = {
    "ASRSERVE_AUTH": "on",
    "ASRSERVE_WEBHOOK_ALLOW": "127.0.0.1",
    "ASRSERVE_WEBHOOK_BACKOFF_S": "0.2",
    "ASRSERVE_RECORD_TRAFFIC": "false",
}


@dataclass
class Deployment:
    mode: str
    url: str
    keys_args: list[str]  # where `asrserve keys` finds this deployment's key store
    admin: str = ""
    alice: str = ""
    bob: str = ""
    worker_metrics: str = ""  # distributed: the worker node's Prometheus endpoint
    # embedded: the in-process app's transport, and the turnstile before its fake engine
    transport: httpx2.BaseTransport | None = None
    turnstile: Turnstile | None = None

    @property
    def real_model(self) -> bool:
        return self.turnstile is None

    def key(self, name: str, *flags: str) -> str:
        """A new key's secret, as ``asrserve keys create`` prints it."""
        return create_here(self.keys_args, name, *flags)

    def client(self, secret: str | None) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {secret}"} if secret is not None else {}
        return httpx2.Client(
            base_url=self.url, timeout=TIMEOUT, headers=headers, transport=self.transport
        )

    def openai(self, secret: str) -> openai.OpenAI:
        http = None if self.transport is None else self.client(None)
        return openai.OpenAI(
            base_url=f"{self.url}/v1", api_key=secret, max_retries=0, http_client=http
        )

    def hold(self) -> None:
        """Embedded: forward passes wait at the engine (the real model takes its time)."""
        if self.turnstile is not None:
            self.turnstile.hold()

    def release(self) -> None:
        if self.turnstile is not None:
            self.turnstile.set()


@pytest.fixture(scope="module", params=["embedded", pytest.param("distributed", marks=slow)])
def deployment(request: pytest.FixtureRequest) -> Deployment:
    found: Deployment = request.getfixturevalue(request.param)
    return found


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    data = tmp_path_factory.mktemp("embedded") / "data"
    found = Deployment("embedded", URL, ["--data-dir", str(data)])
    _with_keys(found)
    with in_process(data, ENV) as app:
        (engine,) = app.engines
        engine.gate = found.turnstile = Turnstile()
        found.transport = app.client._transport
        try:
            yield found
        finally:
            found.turnstile.set()


@pytest.fixture(scope="module")
def distributed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("distributed")
    redis = RedisProcess(root / "redis").start()
    cluster = Cluster(root, redis, env={**ENV, "ASRSERVE_CPU_THREADS": "2"})
    found = Deployment("distributed", "", ["--broker", redis.url])
    _with_keys(found)
    try:
        found.url = cluster.api().url
        port = free_port()
        cluster.env["ASRSERVE_METRICS_PORT"] = str(port)
        cluster.worker()
        found.worker_metrics = f"http://127.0.0.1:{port}/metrics"
        yield found
    finally:
        cluster.stop()
        redis.stop()


def _with_keys(deployment: Deployment) -> None:
    deployment.admin = deployment.key("admin", "--admin")
    deployment.alice = deployment.key("alice")
    deployment.bob = deployment.key("bob")


@pytest.fixture(scope="module")
def clips(corpus: list[Clip]) -> list[Clip]:
    return sorted((c for c in corpus if c.duration <= 10), key=lambda c: c.duration)[:4]


def test_sync_endpoint_and_keys(deployment: Deployment, clips: list[Clip]) -> None:
    with deployment.client(None) as nobody:
        anonymous = nobody.post(ENDPOINT, timeout=30)
    assert anonymous.status_code == 401
    oai = deployment.openai(deployment.alice)
    for clip in clips[:2]:
        with clip.path.open("rb") as audio:
            result = oai.audio.transcriptions.create(
                model="whisper-1", file=audio, response_format="verbose_json"
            )
        if deployment.real_model:
            assert wer_one(clip.text, result.text) <= 0.25, result.text
        assert result.duration == pytest.approx(clip.duration, abs=0.1)
    with deployment.client(deployment.alice) as http:
        assert http.get("/v1/scheduler").status_code == 403  # admins only
    with deployment.client(deployment.admin) as http:
        view = http.get("/v1/scheduler").json()
    assert view["mode"] == deployment.mode
    if deployment.mode == "distributed":  # the API node shows the worker nodes' reports
        (worker,) = view["workers"]
        assert worker["devices"] == ["cpu:0"] and worker["policy"] == "greedy", worker
        assert view["devices"] == [f"{worker['node']}/cpu:0"]  # merged, for the dashboard
    if deployment.worker_metrics:  # a worker node has no API, but has its metrics
        metrics = httpx.get(deployment.worker_metrics, timeout=10).text
        assert 'asrserve_jobs_total{outcome="succeeded"}' in metrics
        assert "asrserve_batch_size_count" in metrics
        assert 'asrserve_worker_requests_in_flight{priority="interactive"}' in metrics
        probes = deployment.worker_metrics.removesuffix("/metrics")
        assert httpx.get(f"{probes}/healthz", timeout=10).json() == {"status": "ok"}
        assert httpx.get(f"{probes}/readyz", timeout=10).json() == {"status": "ready"}
        # no key: bound to --host (loopback here), not to every address (docs/security.md)
        elsewhere = deployment.worker_metrics.replace("127.0.0.1", "127.0.0.2")
        with pytest.raises(httpx.ConnectError):
            httpx.get(elsewhere, timeout=10)


@slow
def test_real_speech(distributed: Deployment) -> None:
    """The real model's text of real speech through the worker node (an embedded server's:
    ``test_translation_routes.py::test_asr_answers_every_output_as_a_download``)."""
    references = json.loads((REAL_SPEECH / "references.json").read_text(encoding="utf-8"))
    oai = distributed.openai(distributed.bob)
    with JFK.open("rb") as audio:
        real = oai.audio.transcriptions.create(model="whisper-1", file=audio)
    assert wer_one(references[JFK.name], real.text) <= 0.1, real.text


def test_job_lifecycle_and_tenants(deployment: Deployment, clips: list[Clip]) -> None:
    with deployment.client(deployment.alice) as alice, deployment.client(deployment.bob) as bob:
        job = submit_job(alice, clips[0].path, response_format="text")
        assert bob.get(f"/v1/jobs/{job['id']}").status_code == 404
        done = wait_job(alice, job["id"], wait=30)
        assert done["status"] == "succeeded" and done["attempts"] == 1, done
        if deployment.real_model:
            assert wer_one(clips[0].text, done["result"]["text"]) <= 0.25
        assert done["audio_duration"] == pytest.approx(clips[0].duration, abs=0.1)
        srt = alice.get(f"/v1/jobs/{job['id']}/transcript", params={"format": "srt"})
        assert srt.status_code == 200 and "-->" in srt.text
        assert alice.delete(f"/v1/jobs/{job['id']}").json() == done  # finished: unchanged
        listed = alice.get("/v1/jobs", params={"limit": 100}).json()["data"]
        assert job["id"] in {j["id"] for j in listed}
        assert job["id"] not in {j["id"] for j in bob.get("/v1/jobs").json()["data"]}


def test_cancel_queued_and_running(
    deployment: Deployment, corpus: list[Clip], clips: list[Clip]
) -> None:
    long_clip = corpus[-1]
    with deployment.client(deployment.alice) as http:
        deployment.hold()  # embedded: the running job stays running
        try:
            running = submit_job(http, long_clip.path)["id"]
            wait_until(lambda: job_status(http, running) == "running", 60, "a start")
            queued = [submit_job(http, long_clip.path)["id"] for _ in range(2)]
            cancelled = http.delete(f"/v1/jobs/{queued[-1]}").json()
            assert cancelled["status"] == "cancelled" and cancelled["result"] is None
            stopped = http.delete(f"/v1/jobs/{running}").json()
            assert stopped["status"] == "cancelled", stopped
        finally:
            deployment.release()
        assert wait_job(http, queued[0], wait=60)["status"] == "succeeded"
        for job_id in (running, queued[-1]):
            after = http.get(f"/v1/jobs/{job_id}").json()
            assert after["status"] == "cancelled" and after["result"] is None, after
        gone = http.get(f"/v1/jobs/{running}/transcript")
        assert gone.status_code == 409 and gone.json()["error"]["code"] == "job_cancelled"


def test_webhook_retried_then_delivered(
    deployment: Deployment, clips: list[Clip], receiver: tuple[Receiver, str]
) -> None:
    record, hook_url = receiver
    with deployment.client(deployment.alice) as http:
        job = submit_job(http, clips[1].path, callback_url=hook_url)
        wait_until(lambda: record.answered_ok(), 60, "a delivered webhook")
        wait_until(
            lambda: http.get(f"/v1/jobs/{job['id']}").json()["webhook"]["status"] == "delivered",
            10,
            "the delivery to be recorded",
        )
    payload = json.loads(record.answered_ok()[0][2])
    assert payload["id"] == job["id"] and payload["status"] == "succeeded"
    assert [call[0] for call in record.calls] == [500, 200]  # retried once, sent once


def test_batch_api(deployment: Deployment, clips: list[Clip], tmp_path: Path) -> None:
    oai = deployment.openai(deployment.bob)
    file_ids = upload_audio(oai, [clip.path for clip in clips[:2]])
    lines = [line(f"c{i}", file_ids[i % 2], response_format="text") for i in range(6)]
    batch_id = create_batch(oai, [*lines, line("bad", "x")], tmp_path)
    wait_until(lambda: oai.batches.retrieve(batch_id).status == "completed", 180, "the batch")
    done = oai.batches.retrieve(batch_id)
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed) == (7, 6)
    assert done.output_file_id is not None and done.error_file_id is not None
    output = [json.loads(x) for x in oai.files.content(done.output_file_id).text.splitlines()]
    assert [entry["custom_id"] for entry in output] == [f"c{i}" for i in range(6)]
    if deployment.real_model:
        for i, entry in enumerate(output):
            assert wer_one(clips[i % 2].text, entry["response"]["body"]) <= 0.25
    errors = [json.loads(x) for x in oai.files.content(done.error_file_id).text.splitlines()]
    assert [(e["custom_id"], e["response"]["status_code"]) for e in errors] == [("bad", 404)]
    with deployment.client(deployment.alice) as alice:  # another tenant's batch: not there
        assert alice.get(f"/v1/batches/{batch_id}").status_code == 404


def test_interactive_goes_ahead_of_an_async_backlog(
    deployment: Deployment, clips: list[Clip]
) -> None:
    with deployment.client(deployment.alice) as http, ThreadPoolExecutor(1) as pool:
        deployment.hold()
        try:
            backlog = [submit_job(http, clips[-1].path)["id"] for _ in range(12)]
            answer = pool.submit(transcribe, http, clips[0].path)
            if deployment.turnstile is not None:
                step_to(deployment, deployment.turnstile, answer, backlog[-1])
            response = answer.result()
            assert response.status_code == 200, response.text
            states = [job_status(http, job_id) for job_id in backlog]
        finally:
            deployment.release()
        # answered while the backlog's tail, claimed (prefetched) already, was still unfinished
        assert states[-1] == "running", states
        for job_id in backlog:
            assert wait_job(http, job_id, wait=30)["status"] == "succeeded"


def step_to(deployment: Deployment, turnstile: Turnstile, answer: Future[Any], tail: str) -> None:
    """Embedded: with a backlog pass holding the device, the backlog's ``tail`` claimed and
    the interactive request's window waiting, let passes through one at a time: the next
    batch the scheduler takes must be the interactive one (a FIFO scheduler would take the
    backlog's first, and never get there while it is held)."""
    interactive = str(int(Priority.INTERACTIVE))
    with deployment.client(deployment.admin) as admin:

        def waiting_interactive() -> int:
            queued: dict[str, int] = admin.get("/v1/scheduler").json()["queued_items"]
            return queued.get(interactive, 0)

        turnstile.until_waiting()  # a backlog pass holds the device
        wait_until(lambda: job_status(admin, tail) == "running", 60, "the tail to be claimed")
        wait_until(waiting_interactive, 60, "the interactive window to wait", every=0.02)
        turnstile.let(1)  # the backlog pass goes; the device takes its next batch
        wait_until(lambda: not waiting_interactive(), 60, "the interactive window to be taken")
        turnstile.until_waiting()  # the batch that took it
        turnstile.let(1)
        answer.result()
