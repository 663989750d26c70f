"""``ASRSERVE_ENGINE=auto``: the engine that can run this machine's device, and why.

CTranslate2 where it runs the device: the CPU (its int8 is the faster engine there,
docs/benchmarks.md), and an NVIDIA GPU it has kernels for with CUDA 12's cuBLAS present
(its wheels link ``libcublas.so.12`` and carry no Blackwell kernels: on such a card it sees
no device). Everywhere else PyTorch runs it: a machine with CUDA 13 alone, Blackwell, AMD
under ROCm, Apple's GPU. The answer and its reason go to the startup log, ``/v1/scheduler``
and the dashboard.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass

from asrserve.settings.registered import AUTO

CTRANSLATE2 = "ctranslate2"
TRANSFORMERS = "transformers"


@dataclass(frozen=True)
class EngineChoice:
    configured: str  # the setting: "auto" or an engine's name
    engine: str  # the engine that runs
    reason: str

    def view(self) -> dict[str, str]:
        return {"configured": self.configured, "engine": self.engine, "reason": self.reason}


@dataclass(frozen=True)
class Probes:
    """What the machine can run, each asked only when the choice needs it."""

    ctranslate2_cuda: Callable[[], str | None]  # None: it runs CUDA here; else why not
    torch_gpu: Callable[[], str | None]  # "cuda", "mps" or None
    torch_build: Callable[[], str]  # what PyTorch was built for, in words


def choose(engine: str, device: str, probes: Probes | None = None) -> EngineChoice:
    """The engine for the ``engine`` and ``device`` settings."""
    if engine != AUTO:
        return EngineChoice(engine, engine, "set by ASRSERVE_ENGINE")
    probes = probes or MACHINE
    if device == "cpu":
        return EngineChoice(AUTO, CTRANSLATE2, "the CPU: CTranslate2's int8 is faster there")
    if device == "mps":
        return EngineChoice(AUTO, TRANSFORMERS, "Apple's GPU: only PyTorch runs it")
    why_not = probes.ctranslate2_cuda()
    if why_not is None:
        return EngineChoice(AUTO, CTRANSLATE2, "CTranslate2 runs this CUDA device")
    gpu = probes.torch_gpu()
    if gpu is not None:
        reason = f"{why_not}; PyTorch ({probes.torch_build()}) runs this {gpu} device"
        return EngineChoice(AUTO, TRANSFORMERS, reason)
    if device == "cuda":
        return EngineChoice(AUTO, CTRANSLATE2, f"{why_not}, nor does PyTorch see a GPU")
    return EngineChoice(AUTO, CTRANSLATE2, f"no GPU ({why_not}): the CPU, on CTranslate2")


def _ctranslate2_cuda() -> str | None:
    try:
        import ctranslate2
    except ImportError:
        return "CTranslate2 is not installed"
    if ctranslate2.get_cuda_device_count() == 0:
        return "CTranslate2 sees no CUDA device it has kernels for"
    try:
        ctypes.CDLL("libcublas.so.12")
    except OSError:
        return "CTranslate2 needs CUDA 12's cuBLAS (libcublas.so.12), which is not here"
    return None


def _torch_gpu() -> str | None:
    from asrserve.engine.pytorch import devices

    return devices.gpu()


def _torch_build() -> str:
    from asrserve.engine.pytorch import devices

    return devices.build()


MACHINE = Probes(
    ctranslate2_cuda=functools.cache(_ctranslate2_cuda),
    torch_gpu=functools.cache(_torch_gpu),
    torch_build=_torch_build,
)
