"""Models as users manage them: keep_alive (Ollama's) in ``GET /v1/models`` and on a
request, and an operator's load and unload over HTTP.

What is HTTP semantics (who may set keep_alive, load or unload; what the cards say; when the
weights are released and loaded again) is asked of the app in this process with a fake
engine (``tests/support/inprocess.py``), whose ``unload``/``load`` the routes call. What only
the real model shows runs a real server with the packaged tiny.en: the memory an unload
over HTTP gives back, read from the server's /proc, and its next request transcribing again.
The distributed case runs a real API node and worker node on Redis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from starlette.testclient import TestClient

from asrserve.bench.redis_process import RedisProcess
from asrserve.bench.soak import rss_bytes
from tests.support.api import submit_job, wait_job
from tests.support.cluster import Cluster
from tests.support.inprocess import in_process
from tests.support.keys import auth, new_key_here
from tests.support.servers import JFK, Server
from tests.support.wait import wait_until

MODEL = "/v1/models/tiny.en"
HEARD = "11.0\n"  # the fake's text for jfk.flac: its one chunk's duration


def transcribe(client: TestClient, secret: str, **data: str) -> httpx2.Response:
    with JFK.open("rb") as audio:
        return client.post(
            "/v1/audio/transcriptions",
            files={"file": audio},
            data={"response_format": "text", **data},
            headers=auth(secret),
        )


def test_keep_alive_load_and_unload_through_http(tmp_path: Path) -> None:
    data = tmp_path / "data"
    user, admin = new_key_here(data, "alice"), new_key_here(data, "ops", "--admin")
    with in_process(data, {"ASRSERVE_AUTH": "on"}) as app:
        (engine,) = app.engines
        client = app.client

        def card() -> dict[str, Any]:
            answer: dict[str, Any] = client.get(MODEL, headers=auth(user)).json()
            return answer

        listed = client.get("/v1/models", headers=auth(user)).json()["data"]
        assert [(m["id"], m["keep_alive"], m["loaded"]) for m in listed] == [("tiny.en", -1, True)]

        # a tenant's keep_alive may keep the model longer, never release it sooner than its
        # default (forever here): another tenant's next request would pay the reload
        assert transcribe(client, user, keep_alive="0").raise_for_status().text == HEARD
        assert (card()["keep_alive"], card()["loaded"]) == (-1, True)
        # an operator's keep_alive=0: released once the request's work is done
        assert transcribe(client, admin, keep_alive="0").raise_for_status().text == HEARD
        wait_until(lambda: card()["loaded"] is False, 60, lambda: f"an unload: {card()}")
        assert card()["keep_alive"] == 0 and engine.weights is False
        refused = transcribe(client, user, keep_alive="later")
        assert (refused.status_code, refused.json()["error"]["param"]) == (400, "keep_alive")

        # operators only
        for action in ("load", "unload"):
            denied = client.post(f"{MODEL}/{action}", headers=auth(user))
            assert (denied.status_code, denied.json()["error"]["code"]) == (403, "admin_required")
        assert client.post("/v1/models/nope/unload", headers=auth(admin)).status_code == 404

        loaded = client.post(f"{MODEL}/load", params={"keep_alive": "-1"}, headers=auth(admin))
        assert (loaded.json()["loaded"], loaded.json()["keep_alive"]) == (True, -1)
        assert engine.loads == 1
        assert transcribe(client, user).raise_for_status().text == HEARD
        unloaded = client.post(f"{MODEL}/unload", headers=auth(admin)).raise_for_status().json()
        assert unloaded["loaded"] is False and card()["loaded"] is False
        assert engine.weights is False

        # its next request loads it again; a request without keep_alive sets the default back
        assert transcribe(client, admin, keep_alive="5m").raise_for_status().text == HEARD
        assert (card()["loaded"], card()["keep_alive"]) == (True, 300)
        assert engine.loads == 2
        assert transcribe(client, user).raise_for_status().text == HEARD
        assert card()["keep_alive"] == -1


@pytest.mark.slow
def test_an_unload_through_http_gives_the_weights_back(
    make_server: type[Server], tmp_path: Path
) -> None:
    """tiny.en int8 (72 MiB; measured 98 MiB released, docs/models.md) in a real server of
    one replica: ``POST /v1/models/tiny.en/unload`` gives the weights back to the system, not
    to the allocator's arenas (faster-whisper #992). (That the next request loads it again is
    the in-process test's; that the real engine then transcribes right, after unload and load
    cycles, is ``tests/test_engine.py``'s ``test_an_unloaded_model_gives_its_memory_back``.)"""
    server = make_server(tmp_path / "data", env={"ASRSERVE_CPU_REPLICAS": "1"}).start()
    assert server.proc is not None
    with httpx.Client(base_url=server.url, timeout=120) as client, JFK.open("rb") as audio:
        files, data = {"file": audio}, {"response_format": "text"}
        heard = client.post("/v1/audio/transcriptions", files=files, data=data)
        assert "country" in heard.raise_for_status().text
        rss_loaded = rss_bytes(server.proc.pid)
        unloaded = client.post(f"{MODEL}/unload").raise_for_status().json()
        assert unloaded["loaded"] is False
        view = client.get("/v1/scheduler").json()
    weights = next(m["weights_bytes"] for m in view["models"] if m["id"] == "tiny.en")
    assert rss_bytes(server.proc.pid) < rss_loaded - weights / 3


@pytest.mark.slow
def test_a_jobs_keep_alive_reaches_the_worker_that_runs_it(tmp_path: Path) -> None:
    """Distributed: the API node shows the configured keep_alive and ``loaded: null``, refuses
    to load or unload (the weights live on the workers), and a job's ``keep_alive=0``
    travels with it to the worker, which releases the model once the job is done."""
    redis = RedisProcess(tmp_path / "redis").start()
    cluster = Cluster(tmp_path, redis, env={"ASRSERVE_LEASE_S": "3"})
    try:
        api = cluster.api()
        cluster.worker()
        with httpx.Client(base_url=api.url, timeout=120) as client:
            card = client.get(MODEL).json()
            assert (card["keep_alive"], card["loaded"]) == (-1, None)
            refused = client.post(f"{MODEL}/unload")
            assert (refused.status_code, refused.json()["error"]["code"]) == (
                409,
                "models_on_workers",
            )

            def loaded_on() -> list[str] | None:
                """The worker's devices holding tiny.en, as it last reported (None: no
                report yet)."""
                workers = client.get("/v1/scheduler").json()["workers"]
                models = [m for w in workers for m in w["models"] if m["id"] == "tiny.en"]
                return list(models[0]["loaded_on"]) if models else None

            assert wait_until(loaded_on, 60, "the worker's report of its loaded model")
            job = submit_job(client, JFK, keep_alive="0")
            assert wait_job(client, job["id"])["status"] == "succeeded"
            wait_until(lambda: loaded_on() == [], 60, lambda: f"an unload: {loaded_on()}")
    finally:
        cluster.stop()
        redis.stop()
