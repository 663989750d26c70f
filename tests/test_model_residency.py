"""Models as users manage them, against a real server with the packaged tiny.en: keep_alive
(Ollama's) in ``GET /v1/models`` and on a request, and an operator's load and unload over
HTTP, with the memory an unload gives back read from the server's /proc."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from asrserve.bench.redis_process import RedisProcess
from asrserve.bench.soak import rss_bytes
from tests.support.api import submit_job, wait_job
from tests.support.cluster import Cluster
from tests.support.keys import auth, new_key
from tests.support.servers import JFK, Server
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow

MODEL = "/v1/models/tiny.en"


def transcribe(client: httpx.Client, secret: str, **data: str) -> httpx.Response:
    with JFK.open("rb") as audio:
        return client.post(
            "/v1/audio/transcriptions",
            files={"file": audio},
            data={"response_format": "text", **data},
            headers=auth(secret),
        )


def test_keep_alive_load_and_unload_through_http(make_server: type[Server], tmp_path: Path) -> None:
    data = tmp_path / "data"
    user, admin = new_key(data, "alice"), new_key(data, "ops", "--admin")
    env = {"ASRSERVE_AUTH": "on", "ASRSERVE_CPU_REPLICAS": "1"}
    server = make_server(data, env=env).start()
    with httpx.Client(base_url=server.url, timeout=120) as client:
        check(server, client, user, admin)


def check(server: Server, client: httpx.Client, user: str, admin: str) -> None:
    assert server.proc is not None

    def card() -> dict[str, Any]:
        answer: dict[str, Any] = client.get(MODEL, headers=auth(user)).json()
        return answer

    listed = client.get("/v1/models", headers=auth(user)).json()["data"]
    assert [(m["id"], m["keep_alive"], m["loaded"]) for m in listed] == [("tiny.en", -1, True)]

    # a tenant's keep_alive may keep the model longer, never release it sooner than its
    # default (forever here): another tenant's next request would pay the reload
    assert "country" in transcribe(client, user, keep_alive="0").raise_for_status().text
    assert (card()["keep_alive"], card()["loaded"]) == (-1, True)
    # an operator's keep_alive=0: released once the request's work is done
    assert "country" in transcribe(client, admin, keep_alive="0").raise_for_status().text
    wait_until(lambda: card()["loaded"] is False, 60, lambda: f"an unload: {card()}")
    assert card()["keep_alive"] == 0
    refused = transcribe(client, user, keep_alive="later")
    assert (refused.status_code, refused.json()["error"]["param"]) == (400, "keep_alive")

    # operators only
    for action in ("load", "unload"):
        denied = client.post(f"{MODEL}/{action}", headers=auth(user))
        assert (denied.status_code, denied.json()["error"]["code"]) == (403, "admin_required")
    assert client.post("/v1/models/nope/unload", headers=auth(admin)).status_code == 404

    loaded = client.post(f"{MODEL}/load", params={"keep_alive": "-1"}, headers=auth(admin))
    assert (loaded.json()["loaded"], loaded.json()["keep_alive"]) == (True, -1)
    assert "country" in transcribe(client, user).raise_for_status().text
    rss_loaded = rss_bytes(server.proc.pid)
    unloaded = client.post(f"{MODEL}/unload", headers=auth(admin)).raise_for_status().json()
    assert unloaded["loaded"] is False and card()["loaded"] is False
    # the weights are given back (tiny.en int8: 72 MiB; measured 98 MiB released,
    # docs/models.md), not kept in the allocator's arenas (faster-whisper #992)
    view = client.get("/v1/scheduler", headers=auth(admin)).json()
    weights = next(m["weights_bytes"] for m in view["models"] if m["id"] == "tiny.en")
    assert rss_bytes(server.proc.pid) < rss_loaded - weights / 3

    # its next request loads it again; a request without keep_alive sets the default back
    assert "country" in transcribe(client, admin, keep_alive="5m").raise_for_status().text
    assert (card()["loaded"], card()["keep_alive"]) == (True, 300)
    assert "country" in transcribe(client, user).raise_for_status().text
    assert card()["keep_alive"] == -1


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
