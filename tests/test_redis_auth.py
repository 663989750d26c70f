"""A Redis that requires a password, as the shipped compose stack and Kubernetes manifests
run it: a node given the password in a file (``ASRSERVE_BROKER_PASSWORD_FILE``, a mounted
Secret) reaches it; without the password nothing does."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from asrserve.bench.redis_process import RedisProcess
from asrserve.cli.server_process import ServerProcess, WorkerProcess
from asrserve.drivers.redis import BrokerUnavailable, connect
from asrserve.settings import Settings
from asrserve.settings.distributed import shown_url
from tests.support.api import submit_job, wait_job
from tests.support.real_speech import librivox

pytestmark = pytest.mark.slow

PASSWORD = f"pw-{secrets.token_hex(16)}"


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = RedisProcess(tmp_path / "redis", password=PASSWORD).start()
    yield server
    server.stop()


async def ping(url: str) -> object:
    client = connect(url)
    try:
        return await client.ping()
    finally:
        await client.aclose()


def test_the_password_comes_from_its_file_and_is_never_shown(
    redis: RedisProcess, tmp_path: Path
) -> None:
    secret = tmp_path / "redis-password"
    secret.write_text(PASSWORD + "\n")  # as `openssl rand -hex 24 > file` writes it
    settings = Settings(broker=redis.url, broker_password_file=secret)
    assert settings.broker_url is not None
    assert asyncio.run(ping(settings.broker_url)) is True
    with pytest.raises(BrokerUnavailable):
        asyncio.run(ping(redis.url))
    assert PASSWORD not in shown_url(settings.broker_url)
    assert shown_url(settings.broker_url) == redis.url.replace("//", "//:***@")


def test_an_acl_user_keeps_its_name_as_the_url_writes_it(tmp_path: Path) -> None:
    secret = tmp_path / "redis-password"
    secret.write_text("p@ss\n")
    settings = Settings(broker="rediss://us%40er@redis:6380/0", broker_password_file=secret)
    assert settings.broker_url == "rediss://us%40er:p%40ss@redis:6380/0"
    assert shown_url("rediss://us%40er:p%40ss@redis:6380/0") == "rediss://us%40er:***@redis:6380/0"


def test_an_api_node_and_a_worker_serve_through_it(redis: RedisProcess, tmp_path: Path) -> None:
    secret = tmp_path / "redis-password"
    secret.write_text(PASSWORD + "\n")
    env = {
        "ASRSERVE_BROKER": redis.url,
        "ASRSERVE_BROKER_PASSWORD_FILE": str(secret),
        "ASRSERVE_SHARED_DIR": str(tmp_path / "shared"),
    }
    api = ServerProcess(tmp_path / "api", env=env).start()
    worker = WorkerProcess(tmp_path / "worker" / "data", env=env).start(timeout=120)
    try:
        clip = librivox()[0]
        with httpx.Client(base_url=api.url, timeout=60) as http:
            done = wait_job(http, submit_job(http, clip.path)["id"])
        assert done["status"] == "succeeded", done
        logs = [node.log_path for node in (api, worker)]
        assert all(path is not None and PASSWORD not in path.read_text() for path in logs)
    finally:
        worker.stop()
        api.stop()
