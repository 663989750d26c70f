"""One caller cannot hold every connection open: event streams and long polls per caller are
capped (``ASRSERVE_MAX_WAITS_PER_KEY``), past it ``429 too_many_waits`` at once, another
caller unaffected, and a closed stream gives its share back.

An API node with no worker node (Redis, distributed mode): its jobs stay queued, so their
event streams stay open for as long as the test holds them, without timing."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from asrserve.bench.corpus import Clip
from asrserve.bench.redis_process import RedisProcess
from tests.support.api import submit_job
from tests.support.cluster import Cluster
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow
SHARE = 2


@pytest.fixture
def api_only(tmp_path: Path) -> Iterator[Cluster]:
    redis = RedisProcess(tmp_path / "redis").start()
    deployment = Cluster(tmp_path, redis, env={"ASRSERVE_MAX_WAITS_PER_KEY": str(SHARE)})
    try:
        deployment.api()
        yield deployment
    finally:
        deployment.stop()
        redis.stop()


def _from(address: str, url: str) -> httpx.Client:
    """A client whose connections come from ``address`` (a caller of its own, auth off)."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=url, transport=transport, timeout=30)


def test_a_caller_holds_at_most_its_share_of_streams_and_long_polls(
    api_only: Cluster, corpus: list[Clip]
) -> None:
    url = api_only.apis[0].url
    with _from("127.0.0.1", url) as alice, _from("127.0.0.2", url) as bob:
        job = submit_job(alice, corpus[0].path)["id"]
        events = f"/v1/jobs/{job}/events"
        with contextlib.ExitStack() as held:
            streams = [held.enter_context(alice.stream("GET", events)) for _ in range(SHARE)]
            assert [s.status_code for s in streams] == [200] * SHARE
            for path, params in ((events, {}), (f"/v1/jobs/{job}", {"wait": 5})):
                with alice.stream("GET", path, params=params) as refused:
                    assert refused.status_code == 429
                    error = json.loads(refused.read())["error"]
                    assert error["code"] == "too_many_waits"
                    assert int(refused.headers["retry-after"]) > 0
            with bob.stream("GET", events) as other:
                assert other.status_code == 200  # another caller's share is its own
            held.close()  # the streams closed: their share comes back once the server sees it

            def long_poll() -> httpx.Response | None:
                response = alice.get(f"/v1/jobs/{job}", params={"wait": 0.1})
                return response if response.status_code == 200 else None

            polled = wait_until(long_poll, 30, "alice's closed streams to give their share back")
        assert polled.json()["status"] == "queued"
