"""Shared fixtures: the synthetic corpus, the real engine, and real servers on loopback."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from asrserve.bench.corpus import Clip, build_corpus
from asrserve.bench.redis_process import RedisProcess
from asrserve.engine.base import Engine
from tests.support.corpus_languages import LanguageClip
from tests.support.servers import ROOT, Receiver, Server

# Servers in tests start without the start-up calibration (seconds of the real model per
# start); tests/test_calibration.py runs it, and the curves it seeds, on purpose.
os.environ.setdefault("ASRSERVE_CALIBRATION", "off")


@pytest.fixture(scope="session")
def corpus() -> list[Clip]:
    """12 clips of 2–30 s in five containers plus one of over two minutes (cached)."""
    return build_corpus(ROOT / ".corpus", n_clips=12, long_clip_seconds=130.0)


@pytest.fixture(scope="session")
def long_clip(corpus: list[Clip]) -> Clip:
    """The corpus's clip of over two minutes (five windows)."""
    clip = max(corpus, key=lambda c: c.duration)
    assert clip.duration > 120
    return clip


@pytest.fixture(scope="session")
def short_clip(corpus: list[Clip]) -> Clip:
    """A multi-sentence clip of the corpus (one window), so subtitles have several cues."""
    return max((c for c in corpus if c.duration <= 30), key=lambda c: c.text.count("."))


@pytest.fixture(scope="session")
def language_corpus() -> list[LanguageClip]:
    """Four clips each of German, Spanish, Italian and Portuguese speech (cached)."""
    from tests.support.languages import language_corpus

    return language_corpus()


@pytest.fixture(scope="session")
def base_model() -> Path:
    """The multilingual base model's directory, joined from its packages once (cached)."""
    from tests.support.languages import base_model_dir

    return base_model_dir()


@pytest.fixture(scope="session")
def engine() -> Engine:
    from asrserve.engine import loading
    from asrserve.settings import Settings

    settings = Settings()
    return loading.load(settings, settings.model_cache)[0]["tiny.en"]


@pytest.fixture(scope="session")
def torch_engine() -> Engine:
    """tiny.en on the transformers engine (float32 on the CPU), converted into the shared
    test cache once."""
    from tests.support.engines import transformers
    from tests.support.languages import MODEL_CACHE

    return transformers("tiny.en", MODEL_CACHE)


@pytest.fixture(params=["ctranslate2", "transformers"])
def each_engine(request: pytest.FixtureRequest) -> Engine:
    """The contract's tests, run against each engine's tiny.en."""
    name = "engine" if request.param == "ctranslate2" else "torch_engine"
    found: Engine = request.getfixturevalue(name)
    return found


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[type[Server]]:
    started: list[Server] = []

    class _Server(Server):
        def start(self, timeout: float = 60.0) -> Server:
            started.append(self)
            return super().start(timeout)

    yield _Server
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One shared server for tests that do not restart it."""
    # the webhook tests' receivers listen on loopback, which callbacks may not reach by default
    env = {"ASRSERVE_WEBHOOK_ALLOW": "127.0.0.1"}
    srv = Server(tmp_path_factory.mktemp("shared-server") / "data", env=env)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    record = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            with record.lock:
                status = 500 if not record.calls else 200
                record.calls.append((status, dict(self.headers.items()), body))
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield record, f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """One throwaway redis-server (AOF on) for the session, on a free loopback port."""
    server = RedisProcess(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()
