"""Shared fixtures: the synthetic corpus, the real engine, and real servers on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """``asrserve serve`` as a subprocess, as a user would run it."""

    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> Server:
        env = {
            **os.environ,
            **self.env,
            "ASRSERVE_DATA_DIR": str(self.data_dir),
            "ASRSERVE_PORT": str(self.port),
        }
        self.log_path = self.data_dir.parent / f"server-{self.port}.log"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "asrserve.cli", "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited at start:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server not ready in {timeout} s:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path else ""


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
