"""Shared fixtures: the synthetic corpus, the real engine, and real servers on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from asrserve.bench.server import ServerProcess
from asrserve.corpus import Clip, build_corpus
from asrserve.engine.base import Engine

ROOT = Path(__file__).resolve().parent.parent
REAL_SPEECH = ROOT.parent / "shared" / "real-speech"


@pytest.fixture(scope="session")
def corpus() -> list[Clip]:
    """12 clips of 2–30 s in five containers plus one of over two minutes (cached)."""
    return build_corpus(ROOT / ".corpus", n_clips=12, long_clip_seconds=130.0)


@pytest.fixture(scope="session")
def engine() -> Engine:
    from asrserve.app import load_engines
    from asrserve.settings import Settings

    return load_engines(Settings())[0]


class Server(ServerProcess):
    """``asrserve serve`` as a subprocess, as a user would run it."""


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
    srv = Server(tmp_path_factory.mktemp("shared-server") / "data")
    srv.start()
    yield srv
    srv.stop()
