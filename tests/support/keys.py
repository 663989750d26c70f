"""API keys for tests: made with the ``asrserve keys`` command in a server's data dir, as a
process of its own (``new_key``) or in this process (``new_key_here``, for tests whose app
runs in this process too)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

from asrserve.cli.main import main


def keys(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "asrserve.cli", "keys", *args, "--data-dir", str(data)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def new_key(data: Path, name: str, *flags: str) -> str:
    done = keys(data, "create", "--name", name, *flags)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def new_key_here(data: Path, name: str, *flags: str) -> str:
    """The new key's secret, the command run in this process on ``data``'s key store."""
    return create_here(["--data-dir", str(data)], name, *flags)


def create_here(store: list[str], name: str, *flags: str) -> str:
    """``asrserve keys create`` in this process on the key store that ``store`` names
    (``--data-dir D`` or ``--broker URL``): the new key's secret. The command's own umask
    (``0077``) is this process's again after it."""
    out, err = io.StringIO(), io.StringIO()
    umask = os.umask(0o077)
    os.umask(umask)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["keys", "create", "--name", name, *flags, *store])
    finally:
        os.umask(umask)
    assert code == 0, err.getvalue()
    return out.getvalue().strip()


def auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}
