"""What the machine is and whether everything the check imports is there: the first step.

Its versions (``versions``): the NVIDIA driver and the CUDA version it supports (NVML), the
CUDA runtime PyTorch was built with (``torch.version.cuda``), the cuBLAS 12 CTranslate2
would run on (its wheels link their CUDA 12 runtime in and load ``libcublas.so.12``; its
release where that loads), PyTorch's and CTranslate2's releases (their metadata), the first
GPU's name and compute capability (NVML). None where it does not apply (no GPU, no driver,
not installed).
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from importlib import metadata
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


def nvml() -> dict[str, str | None]:
    """The driver, the CUDA it supports, and GPU 0's name and compute capability (NVML);
    None each where NVML is not there (no driver) or does not tell."""
    found: dict[str, str | None] = {
        "driver": None,
        "driver_cuda": None,
        "gpu": None,
        "compute_capability": None,
    }
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # ImportError, NVMLError: no NVML here
        return found
    try:
        found["driver"] = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda = int(pynvml.nvmlSystemGetCudaDriverVersion())
        found["driver_cuda"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        if pynvml.nvmlDeviceGetCount() > 0:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            found["gpu"] = _text(pynvml.nvmlDeviceGetName(handle))
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            found["compute_capability"] = f"{major}.{minor}"
    except Exception:  # an NVMLError for a call this driver lacks: what was read stays
        pass
    finally:
        pynvml.nvmlShutdown()
    return found


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def cublas12_version() -> str | None:
    """The release of CUDA 12's cuBLAS (``libcublas.so.12``) where it loads, else None:
    what CTranslate2 runs on (its wheels link their CUDA 12 runtime in and load cuBLAS)."""
    try:
        library = ctypes.CDLL("libcublas.so.12")
    except OSError:
        return None
    parts = []
    for kind in range(3):  # cublasGetProperty: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        value = ctypes.c_int(0)
        if library.cublasGetProperty(kind, ctypes.byref(value)) != 0:
            return None
        parts.append(str(value.value))
    return ".".join(parts)


def release(distribution: str) -> str | None:
    """An installed distribution's release (its metadata: nothing imported), else None."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """Driver, CUDA runtimes, PyTorch, CTranslate2 and the card's compute capability."""
    from asrserve.engine.pytorch import devices

    found = nvml()
    found["torch"] = release("torch")
    try:
        built = re.search(r"CUDA (\S+)", devices.build())
    except Exception:  # PyTorch does not import: imports() says why
        built = None
    found["cuda_runtime_torch"] = built.group(1) if built else None
    found["ctranslate2"] = release("ctranslate2")
    found["cublas_ctranslate2"] = cublas12_version()
    return found


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
        "versions": versions(),
        "imports": imports(),
        "shipped_wheels": json.loads(shipped.read_text()) if shipped.is_file() else [],
    }
