"""API keys for tests: made with the ``asrserve keys`` command in a server's data dir."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def keys(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "asrserve.cli", "keys", *args, "--data-dir", str(data)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def new_key(data: Path, name: str, *flags: str) -> str:
    done = keys(data, "create", "--name", name, *flags)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}
