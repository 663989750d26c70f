"""``asrserve serve`` as a subprocess on a free loopback port (for the bench and the tests)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

WORKER_READY = re.compile(r"worker node \S+ ready")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    """``asrserve serve`` (or ``command``) as a subprocess, ready once ``/readyz`` says so."""

    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    module: str = "asrserve.cli"  # what ``python -m`` runs (tests wrap it)
    command: str = "serve"
    starts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 60.0) -> ServerProcess:
        self.spawn()
        return self.wait_ready(timeout)

    def spawn(self) -> ServerProcess:
        """Start the process without waiting for it to be ready."""
        env = {
            **os.environ,
            **self.env,
            "ASRSERVE_DATA_DIR": str(self.data_dir),
            "ASRSERVE_PORT": str(self.port),
            "ASRSERVE_HOST": "127.0.0.1",
        }
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.data_dir.parent / f"{self.command}-{self.port}.log"
        self.starts += 1
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", self.module, self.command],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait_ready(self, timeout: float = 60.0) -> ServerProcess:
        assert self.proc is not None, "spawn() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready():
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.command} exited at start:\n{self.log()}")
            time.sleep(0.1)  # waiting for another process: nothing to subscribe to
        self.kill()
        raise RuntimeError(f"{self.command} not ready in {timeout} s:\n{self.log()}")

    def ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run, as in a crash."""
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
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-4000:]


@dataclass
class WorkerProcess(ServerProcess):
    """``asrserve worker`` (distributed mode, no HTTP: ``port`` only names its log file),
    ready once it logs "worker node … ready"."""

    command: str = "worker"

    def ready(self) -> bool:
        assert self.log_path is not None
        return WORKER_READY.search(self.log_path.read_text(errors="replace")) is not None
