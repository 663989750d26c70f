"""A throwaway ``redis-server`` on a free loopback port (the tests and the bench)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from asrserve.cli.server_process import free_port


@dataclass
class RedisProcess:
    """``redis-server`` with AOF (``appendonly yes``, ``appendfsync everysec``) in ``dir``."""

    dir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    password: str | None = None  # ``requirepass``: clients must AUTH with it

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> RedisProcess:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (scripts/system-deps.sh installs it)")
        self.dir.mkdir(parents=True, exist_ok=True)
        log = (self.dir / "redis.log").open("ab")
        args = [
            binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--protected-mode", "yes",
            *(["--requirepass", self.password] if self.password else []),
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited: {(self.dir / 'redis.log').read_text()}")
            if self.ping():
                return self
            time.sleep(0.05)  # waiting for another process to bind: nothing to subscribe to
        self.kill()
        raise RuntimeError("redis-server did not answer in time")

    def ping(self) -> bool:
        import socket

        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                if self.password:  # inline command: a password with no spaces or quotes
                    sock.sendall(f"AUTH {self.password}\r\n".encode())
                    if not sock.recv(16).startswith(b"+OK"):
                        return False
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM: Redis flushes the AOF and exits."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> RedisProcess:
        self.stop()
        return self.start()
