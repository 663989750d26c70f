"""Real servers as the tests run them, and where their inputs live."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import httpx

from asrserve.cli.server_process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent.parent
REAL_SPEECH = ROOT / "tests" / "data"  # real recordings kept in the repository
JFK = REAL_SPEECH / "jfk.flac"

Server: TypeAlias = ServerProcess  # ``asrserve serve`` as a subprocess, as a user runs it


@dataclass
class Receiver:
    """Webhook receiver: answers 500 to the first POST and 200 to the rest, recording each."""

    calls: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answered_ok(self) -> list[tuple[int, dict[str, str], bytes]]:
        with self.lock:
            return [call for call in self.calls if call[0] == 200]


@dataclass
class Limited:
    """A server with small upload limits, and the check that what it refuses leaves no file."""

    server: Server
    client: httpx.Client

    @property
    def audio_dir(self) -> Path:
        return self.server.data_dir / "audio"

    def audio_files(self) -> set[str]:
        return set(os.listdir(self.audio_dir)) if self.audio_dir.exists() else set()

    def healthy(self) -> None:
        assert self.server.proc is not None and self.server.proc.poll() is None, self.server.log()
        assert self.client.get("/healthz").json() == {"status": "ok"}

    def rejected(self, path: str, **kwargs: Any) -> httpx.Response:
        """POST something the server must turn away: no file may stay behind."""
        before = self.audio_files()
        resp = self.client.post(path, **kwargs)
        left = self.audio_files() - before
        assert not left, f"{path} left {left} in {self.audio_dir} after {resp.status_code}"
        self.healthy()
        return resp
