"""``ASRSERVE_ENGINE=auto``: the engine that can run this machine's device, and why.

CTranslate2 where it runs the device: the CPU (its int8 is the faster engine there,
docs/benchmarks.md), and NVIDIA cards it carries code for, with CUDA 12's cuBLAS present
(its wheels link ``libcublas.so.12``). What it carries is read from its installed library
(``engine/cuda_code.py``), each card's compute capability from NVML. Everywhere else
PyTorch runs it: a machine with CUDA 13 alone, Blackwell, AMD under ROCm, Apple's GPU. The
answer and its reason go to the startup log, ``/v1/scheduler`` and the dashboard.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from asrserve.engine.cuda_code import Card, GpuCode, cubin_for, ptx_for, read_gpu_code
from asrserve.settings.registered import AUTO

CTRANSLATE2 = "ctranslate2"
TRANSFORMERS = "transformers"

# A card CTranslate2 carries no cubin for can run its PTX, which the driver compiles at run
# time. asrserve takes that up to compute capability 9.x, Hopper: CTranslate2's PyPI wheels
# carry no sm_90 cubin (4.8.5: sm_53 to sm_86 and compute_86 PTX), so an H100 runs them on
# their PTX. Blackwell (10.0 and up) it leaves to PyTorch, whose CUDA 12.8 and 13 builds
# carry code built for those cards.
PTX_UP_TO_MAJOR = 9


@dataclass(frozen=True)
class EngineChoice:
    configured: str  # the setting: "auto" or an engine's name
    engine: str  # the engine that runs
    reason: str

    def view(self) -> dict[str, str]:
        return {"configured": self.configured, "engine": self.engine, "reason": self.reason}


@dataclass(frozen=True)
class Ctranslate2Build:
    """The installed CTranslate2: its release and the GPU code its library carries."""

    release: str
    code: GpuCode


@dataclass(frozen=True)
class Probes:
    """What the machine can run, each asked only when the choice needs it."""

    nvidia_cards: Callable[[], tuple[Card, ...] | str]  # NVML's cards, or why there are none
    ctranslate2_build: Callable[[], Ctranslate2Build | str]  # or why it cannot be told
    cublas12: Callable[[], str | None]  # None: libcublas.so.12 loads; else why not
    torch_gpu: Callable[[], str | None]  # "cuda", "mps" or None
    torch_build: Callable[[], str]  # what PyTorch was built for, in words

    def ctranslate2_cuda(self) -> str | None:
        """None where CTranslate2 runs this machine's NVIDIA cards; else why not."""
        runs, reason = ctranslate2_on_cuda(self)
        return None if runs else reason


def choose(engine: str, device: str, probes: Probes | None = None) -> EngineChoice:
    """The engine for the ``engine`` and ``device`` settings."""
    if engine != AUTO:
        return EngineChoice(engine, engine, "set by ASRSERVE_ENGINE")
    probes = probes or MACHINE
    if device == "cpu":
        return EngineChoice(AUTO, CTRANSLATE2, "the CPU: CTranslate2's int8 is faster there")
    if device == "mps":
        return EngineChoice(AUTO, TRANSFORMERS, "Apple's GPU: only PyTorch runs it")
    runs, why = ctranslate2_on_cuda(probes)
    if runs:
        return EngineChoice(AUTO, CTRANSLATE2, why)
    gpu = probes.torch_gpu()
    if gpu is not None:
        reason = f"{why}; PyTorch ({probes.torch_build()}) runs this {gpu} device"
        return EngineChoice(AUTO, TRANSFORMERS, reason)
    if device == "cuda":
        return EngineChoice(AUTO, CTRANSLATE2, f"{why}, nor does PyTorch see a GPU")
    return EngineChoice(
        AUTO, CTRANSLATE2, f"no GPU either engine runs ({why}): the CPU, on CTranslate2"
    )


def ctranslate2_on_cuda(probes: Probes) -> tuple[bool, str]:
    """Whether CTranslate2 runs every NVIDIA card here, and why (or why not)."""
    cards = probes.nvidia_cards()
    if isinstance(cards, str):
        return False, cards
    build = probes.ctranslate2_build()
    if isinstance(build, str):
        return False, build
    if not build.code.cubins and not build.code.ptx:
        return False, f"CTranslate2 {build.release} carries no CUDA code (a build without it)"
    reasons = []
    for card in dict.fromkeys(cards):  # each kind of card once, in NVML's order
        runs, reason = card_fit(build, card)
        if not runs:
            return False, reason
        reasons.append(reason)
    missing = probes.cublas12()
    if missing is not None:
        return False, missing
    return True, "; ".join(reasons)


def card_fit(build: Ctranslate2Build, card: Card) -> tuple[bool, str]:
    """Whether CTranslate2's code runs ``card``, and which of it decided."""
    ctranslate2 = f"CTranslate2 {build.release}"
    cubin = cubin_for(build.code, card)
    if cubin is not None:
        return True, f"{ctranslate2} runs {card.describe()} on its sm_{cubin} code"
    ptx = ptx_for(build.code, card)
    carries = f"{ctranslate2} carries {build.code.describe()}"
    if ptx is None:
        return False, f"{carries}, none that runs {card.describe()}"
    if card.capability[0] > PTX_UP_TO_MAJOR:
        return False, (
            f"{carries}, none built for {card.describe()}: asrserve compiles its"
            f" compute_{ptx} PTX for no card above compute capability {PTX_UP_TO_MAJOR}.x"
        )
    return True, (
        f"{ctranslate2} runs {card.describe()} on its compute_{ptx} PTX, compiled by the"
        f" driver (it carries no sm_{card.capability[0]}x code)"
    )


def nvml_cards() -> tuple[Card, ...] | str:
    """Every NVIDIA card NVML lists (all of them, whatever ``CUDA_VISIBLE_DEVICES``), or why
    there are none to tell."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as error:  # ImportError, NVMLError: no NVIDIA driver here
        return f"NVML sees no NVIDIA GPU: {error}"
    try:
        cards = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            text = name.decode() if isinstance(name, bytes) else str(name)
            cards.append(Card(text, (int(major), int(minor))))
    except pynvml.NVMLError as error:
        return f"NVML does not tell the NVIDIA GPUs' compute capability ({error})"
    finally:
        pynvml.nvmlShutdown()
    return tuple(cards) if cards else "NVML sees no NVIDIA GPU"


def installed_ctranslate2() -> Ctranslate2Build | str:
    """The installed CTranslate2's release and the GPU code in its library (the
    ``libctranslate2*.so*`` among its files: ``ctranslate2.libs/`` in a PyPI wheel), or why
    that cannot be read."""
    try:
        distribution = metadata.distribution("ctranslate2")
    except metadata.PackageNotFoundError:
        return "CTranslate2 is not installed"
    release = distribution.version
    libraries = [
        file
        for file in distribution.files or ()
        if file.name.startswith("libctranslate2") and ".so" in file.name
    ]
    if not libraries:
        return f"CTranslate2 {release}'s files hold no libctranslate2 to read its GPU code from"
    library = Path(str(distribution.locate_file(libraries[0])))
    try:
        return Ctranslate2Build(release, read_gpu_code(library))
    except (OSError, ValueError) as error:
        return f"CTranslate2 {release}'s GPU code could not be read from {library} ({error})"


def _cublas12() -> str | None:
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
    nvidia_cards=functools.cache(nvml_cards),
    ctranslate2_build=functools.cache(installed_ctranslate2),
    cublas12=functools.cache(_cublas12),
    torch_gpu=functools.cache(_torch_gpu),
    torch_build=_torch_build,
)
