"""What the machine is and whether everything the check imports is there: the first step."""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from asrserve.bench.gpu.wheels import SITE

MODULES = (
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "numpy",
    "av",
    "ctranslate2",
    "faster_whisper",
    "onnxruntime",
    "pydantic",
    "pydantic_settings",
    "fastapi",
    "uvicorn",
    "multipart",
    "httpx",
    "redis",
    "websockets",
    "jiwer",
    "pynvml",
    "asrserve.cli.main",
    "asrserve.engine.pytorch.engine",
)


def imports() -> dict[str, str | None]:
    """Each module the service and the check import: None, or why it does not import."""
    found: dict[str, str | None] = {}
    for name in MODULES:
        try:
            importlib.import_module(name)
            found[name] = None
        except Exception as exc:  # an ImportError, or a library that fails to load
            found[name] = f"{type(exc).__name__}: {exc}"
    return found


def gpus() -> list[str]:
    """``nvidia-smi``'s name, memory and driver of each GPU (none without it)."""
    if shutil.which("nvidia-smi") is None:
        return []
    query = "--query-gpu=name,memory.total,driver_version"
    done = subprocess.run(
        ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True
    )
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def cublas12() -> str | None:
    """None if CUDA 12's cuBLAS loads (CTranslate2's CUDA needs it); else why not."""
    try:
        ctypes.CDLL("libcublas.so.12")
    except OSError as exc:
        return str(exc)
    return None


def facts(home: Path) -> dict[str, Any]:
    from asrserve.engine.pytorch import devices

    shipped = home / SITE / "shipped.json"
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cores": os.cpu_count(),
        "gpus": gpus(),
        "torch": devices.build(),
        "torch_gpu": devices.gpu(),
        "libcublas_so_12": cublas12() or "loads",
        "imports": imports(),
        "shipped_wheels": json.loads(shipped.read_text()) if shipped.is_file() else [],
    }
