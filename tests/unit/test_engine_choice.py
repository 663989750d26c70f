"""Which engine runs which device (``ASRSERVE_ENGINE=auto``), what the transformers engine
runs its weights in, and which model directories each engine takes."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pynvml
import pytest
from pydantic import ValidationError

from asrserve.engine.base import ModelNotFoundError
from asrserve.engine.choice import (
    Ctranslate2Build,
    Probes,
    choose,
    installed_ctranslate2,
    nvml_cards,
)
from asrserve.engine.cuda_code import Card, GpuCode
from asrserve.engine.loading import catalog as ctranslate2_catalog
from asrserve.engine.model_dirs import CTRANSLATE2, TRANSFORMERS
from asrserve.engine.pytorch import loading
from asrserve.engine.registry import engine_choice
from asrserve.engine.sources import resolve
from asrserve.engine.whisper import bundled_model_path
from asrserve.settings import Settings

T = TypeVar("T")


# What CTranslate2 4.8.5's PyPI wheel carries (checked on the installed one below).
CTRANSLATE2_4_8_5 = Ctranslate2Build("4.8.5", GpuCode((53, 60, 61, 70, 75, 80, 86), ptx=(86,)))
CARRIES = (
    "CTranslate2 4.8.5 carries sm_53, sm_60, sm_61, sm_70, sm_75, sm_80, sm_86 and compute_86 PTX"
)
NO_NVML = "NVML sees no NVIDIA GPU: NVML Shared Library Not Found"
NO_CUBLAS = "CTranslate2 needs CUDA 12's cuBLAS (libcublas.so.12), which is not here"
CUDA13 = "PyTorch (torch 2.13.0, CUDA 13.0) runs this cuda device"
NOT_ABOVE_HOPPER = "asrserve compiles its compute_86 PTX for no card above compute capability 9.x"
A100 = Card("NVIDIA A100-SXM4-80GB", (8, 0))
RTX_3090 = Card("NVIDIA GeForce RTX 3090", (8, 6))
L4 = Card("NVIDIA L4", (8, 9))
H100 = Card("NVIDIA H100 80GB HBM3", (9, 0))
B200 = Card("NVIDIA B200", (10, 0))
RTX_5090 = Card("NVIDIA GeForce RTX 5090", (12, 0))
M60 = Card("Tesla M60", (5, 2))
EVERY_CUDA_PROBE = ("nvidia_cards", "ctranslate2_build", "cublas12")
TORCH = ("torch_gpu", "torch_build")


@dataclass(frozen=True)
class Machine:
    """A machine as its probes answer (NVML's cards and compute capabilities, cuBLAS 12,
    PyTorch), and what ``auto`` chooses there, after asking which probes, and why."""

    name: str
    device: str  # ASRSERVE_DEVICE
    cards: tuple[Card, ...] | str
    cublas12: str | None
    torch_gpu: str | None
    torch_build: str
    engine: str
    asked: tuple[str, ...]
    reason: str


MACHINES = [
    Machine("A100", "auto", (A100,), None, "cuda", "torch 2.13.0, CUDA 12.8", "ctranslate2",
            EVERY_CUDA_PROBE,
            "CTranslate2 4.8.5 runs NVIDIA A100-SXM4-80GB (compute capability 8.0, sm_80) on"
            " its sm_80 code"),
    Machine("RTX 3090", "cuda", (RTX_3090,), None, "cuda", "torch 2.13.0, CUDA 12.8",
            "ctranslate2", EVERY_CUDA_PROBE,
            "CTranslate2 4.8.5 runs NVIDIA GeForce RTX 3090 (compute capability 8.6, sm_86) on"
            " its sm_86 code"),
    Machine("L4", "auto", (L4,), None, None, "", "ctranslate2", EVERY_CUDA_PROBE,
            "CTranslate2 4.8.5 runs NVIDIA L4 (compute capability 8.9, sm_89) on its sm_86 code"),
    Machine("H100", "auto", (H100,), None, "cuda", "torch 2.13.0, CUDA 12.8", "ctranslate2",
            EVERY_CUDA_PROBE,
            "CTranslate2 4.8.5 runs NVIDIA H100 80GB HBM3 (compute capability 9.0, sm_90) on its"
            " compute_86 PTX, compiled by the driver (it carries no sm_9x code)"),
    Machine("two H100s and an A100", "cuda", (H100, H100, A100), None, None, "", "ctranslate2",
            EVERY_CUDA_PROBE,
            "CTranslate2 4.8.5 runs NVIDIA H100 80GB HBM3 (compute capability 9.0, sm_90) on its"
            " compute_86 PTX, compiled by the driver (it carries no sm_9x code); CTranslate2"
            " 4.8.5 runs NVIDIA A100-SXM4-80GB (compute capability 8.0, sm_80) on its sm_80 code"),
    Machine("H100, CUDA 13 alone", "cuda", (H100,), NO_CUBLAS, "cuda", "torch 2.13.0, CUDA 13.0",
            "transformers", EVERY_CUDA_PROBE + TORCH, f"{NO_CUBLAS}; {CUDA13}"),
    Machine("B200", "auto", (B200,), None, "cuda", "torch 2.13.0, CUDA 13.0", "transformers",
            ("nvidia_cards", "ctranslate2_build", *TORCH),
            f"{CARRIES}, none built for NVIDIA B200 (compute capability 10.0, sm_100):"
            f" {NOT_ABOVE_HOPPER}; {CUDA13}"),
    Machine("RTX 5090", "cuda", (RTX_5090,), None, "cuda", "torch 2.13.0, CUDA 13.0",
            "transformers", ("nvidia_cards", "ctranslate2_build", *TORCH),
            f"{CARRIES}, none built for NVIDIA GeForce RTX 5090 (compute capability 12.0,"
            f" sm_120): {NOT_ABOVE_HOPPER}; {CUDA13}"),
    Machine("RTX 3090 beside an RTX 5090", "cuda", (RTX_3090, RTX_5090), None, "cuda",
            "torch 2.13.0, CUDA 13.0", "transformers",
            ("nvidia_cards", "ctranslate2_build", *TORCH),
            f"{CARRIES}, none built for NVIDIA GeForce RTX 5090 (compute capability 12.0,"
            f" sm_120): {NOT_ABOVE_HOPPER}; {CUDA13}"),
    Machine("RTX 5090 without PyTorch", "cuda", (RTX_5090,), None, None, "", "ctranslate2",
            ("nvidia_cards", "ctranslate2_build", "torch_gpu"),
            f"{CARRIES}, none built for NVIDIA GeForce RTX 5090 (compute capability 12.0,"
            f" sm_120): {NOT_ABOVE_HOPPER}, nor does PyTorch see a GPU"),
    Machine("Tesla M60", "auto", (M60,), None, None, "", "ctranslate2",
            ("nvidia_cards", "ctranslate2_build", "torch_gpu"),
            f"no GPU either engine runs ({CARRIES}, none that runs Tesla M60 (compute capability"
            " 5.2, sm_52)): the CPU, on CTranslate2"),
    Machine("MI300X (ROCm)", "cuda", NO_NVML, None, "cuda", "torch 2.13.0, ROCm 7.0",
            "transformers", ("nvidia_cards", *TORCH),
            f"{NO_NVML}; PyTorch (torch 2.13.0, ROCm 7.0) runs this cuda device"),
    Machine("a Mac", "auto", NO_NVML, None, "mps", "torch 2.13.0", "transformers",
            ("nvidia_cards", *TORCH), f"{NO_NVML}; PyTorch (torch 2.13.0) runs this mps device"),
    Machine("a Mac, mps", "mps", NO_NVML, None, "mps", "torch 2.13.0", "transformers", (),
            "Apple's GPU: only PyTorch runs it"),
    Machine("no GPU", "auto", NO_NVML, None, None, "", "ctranslate2", ("nvidia_cards", "torch_gpu"),
            f"no GPU either engine runs ({NO_NVML}): the CPU, on CTranslate2"),
    Machine("the CPU asked for, on an H100", "cpu", (H100,), None, "cuda", "", "ctranslate2", (),
            "the CPU: CTranslate2's int8 is faster there"),
]  # fmt: skip


def probes(machine: Machine, asked: list[str]) -> Probes:
    """``machine``'s probes, each noting in ``asked`` that it was asked."""

    def answer(name: str, value: T) -> Callable[[], T]:
        def probe() -> T:
            asked.append(name)
            return value

        return probe

    return Probes(
        nvidia_cards=answer("nvidia_cards", machine.cards),
        ctranslate2_build=answer("ctranslate2_build", CTRANSLATE2_4_8_5),
        cublas12=answer("cublas12", machine.cublas12),
        torch_gpu=answer("torch_gpu", machine.torch_gpu),
        torch_build=answer("torch_build", machine.torch_build),
    )


@pytest.mark.parametrize("machine", MACHINES, ids=[m.name for m in MACHINES])
def test_auto_picks_the_engine_that_runs_the_card(machine: Machine) -> None:
    asked: list[str] = []
    chosen = choose("auto", machine.device, probes(machine, asked))
    assert (chosen.engine, chosen.reason) == (machine.engine, machine.reason)
    assert tuple(asked) == machine.asked


def test_the_table_holds_the_installed_ctranslate2s_code() -> None:
    assert installed_ctranslate2() == CTRANSLATE2_4_8_5


def test_whether_ctranslate2_runs_cuda_here() -> None:
    by_name = {m.name: m for m in MACHINES}
    assert probes(by_name["H100"], []).ctranslate2_cuda() is None
    assert probes(by_name["B200"], []).ctranslate2_cuda() == (
        f"{CARRIES}, none built for NVIDIA B200 (compute capability 10.0, sm_100):"
        f" {NOT_ABOVE_HOPPER}"
    )
    assert probes(by_name["a Mac"], []).ctranslate2_cuda() == NO_NVML


def test_a_ctranslate2_without_cuda_code_runs_no_card() -> None:
    rocm_build = Ctranslate2Build("4.7.0", GpuCode(cubins=(), ptx=()))
    machine = Probes(
        nvidia_cards=lambda: (A100,),
        ctranslate2_build=lambda: rocm_build,
        cublas12=lambda: None,
        torch_gpu=lambda: None,
        torch_build=lambda: "",
    )
    assert machine.ctranslate2_cuda() == (
        "CTranslate2 4.7.0 carries no CUDA code (a build without it)"
    )


class FakeNvml:
    """pynvml's calls the probe makes, answering for these cards."""

    def __init__(self, cards: list[tuple[bytes | str, tuple[int, int]]]) -> None:
        self.cards = cards
        self.shut = False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes | str:
        return self.cards[handle][0]

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return self.cards[handle][1]


def test_nvml_tells_each_cards_compute_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml([(b"NVIDIA H100 80GB HBM3", (9, 0)), ("NVIDIA GeForce RTX 5090", (12, 0))])
    for name in vars(FakeNvml):
        if name.startswith("nvml"):
            monkeypatch.setattr(pynvml, name, getattr(fake, name))
    assert nvml_cards() == (H100, RTX_5090)
    assert fake.shut
    fake.cards = []
    assert nvml_cards() == "NVML sees no NVIDIA GPU"


def test_without_an_nvidia_driver_nvml_sees_no_card(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_driver() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    monkeypatch.setattr(pynvml, "nvmlInit", no_driver)
    assert nvml_cards() == "NVML sees no NVIDIA GPU: Driver Not Loaded"


def test_the_choice_says_why() -> None:
    chosen = choose("auto", "cuda", probes(MACHINES[5], []))
    assert chosen.view() == {
        "configured": "auto",
        "engine": "transformers",
        "reason": f"{NO_CUBLAS}; PyTorch (torch 2.13.0, CUDA 13.0) runs this cuda device",
    }
    assert choose("transformers", "cpu").reason == "set by ASRSERVE_ENGINE"


def test_the_default_is_auto_and_on_the_cpu_that_is_ctranslate2() -> None:
    assert Settings().engine == "auto"
    assert engine_choice(Settings()).engine == "ctranslate2"


def test_ctranslate2_has_no_apple_gpu() -> None:
    with pytest.raises(ValidationError, match="CTranslate2 has no Apple GPU backend"):
        Settings(engine="ctranslate2", device="mps")


def test_the_weights_run_in_float32_on_the_cpu_and_float16_on_a_gpu() -> None:
    assert [loading.compute_type(d, "default") for d in ("cpu", "cuda", "mps")] == [
        "float32",
        "float16",
        "float16",
    ]
    assert loading.compute_type("cuda", "bfloat16") == "bfloat16"
    with pytest.raises(ModelNotFoundError, match="compute type 'int8' is not one"):
        loading.compute_type("cpu", "int8")


def test_replicas_are_named_per_device() -> None:
    cuda = Settings(engine="transformers", device="cuda", device_index=(0, 3))
    assert loading.device_names(cuda, 2) == ["cuda:0", "cuda:3"]
    assert loading.layout(cuda).replicas == 2
    assert loading.device_names(Settings(engine="transformers", device="mps"), 1) == ["mps:0"]


def transformers_checkpoint(folder: Path) -> Path:
    """A transformers Whisper directory as the hub's openai/whisper-* repos lay one out."""
    folder.mkdir(parents=True)
    config = {"model_type": "whisper", "vocab_size": 51865}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_a_transformers_checkpoint_is_a_model_only_the_transformers_engine_runs(
    tmp_path: Path,
) -> None:
    folder = transformers_checkpoint(tmp_path / "whisper-base")
    source = resolve(str(folder), cache_dir=tmp_path, offline=True)
    assert (source.id, source.format) == ("whisper-base", TRANSFORMERS)
    settings = Settings(engine="transformers", models=(str(folder),))
    served = loading.catalog(settings, settings.model_cache)
    assert [(m.id, m.multilingual, m.weights_bytes) for m in served] == [("whisper-base", True, 7)]
    with pytest.raises(ModelNotFoundError, match="ASRSERVE_ENGINE=transformers"):
        ctranslate2_catalog(settings, settings.model_cache)


def test_a_ctranslate2_model_is_described_alike_by_both_engines(tmp_path: Path) -> None:
    folder = tmp_path / "tiny"
    shutil.copytree(bundled_model_path(), folder)
    assert resolve(str(folder), cache_dir=tmp_path, offline=True).format == CTRANSLATE2
    settings = Settings(models=(str(folder),))
    cache = settings.model_cache
    assert loading.catalog(settings, cache) == ctranslate2_catalog(settings, cache)


@pytest.mark.parametrize("engine", ["ctranslate2", "transformers"])
def test_a_folder_of_neither_kind_is_refused_alike(tmp_path: Path, engine: str) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    settings = Settings(engine=engine, models=(str(tmp_path),))
    with pytest.raises(ModelNotFoundError, match=r"missing: model\.bin\) nor a transformers one"):
        catalog = loading.catalog if engine == "transformers" else ctranslate2_catalog
        catalog(settings, settings.model_cache)


def test_a_transformers_repo_in_the_hub_cache_resolves_offline(tmp_path: Path) -> None:
    storage = tmp_path / "models--openai--whisper-tiny"
    snapshot = storage / "snapshots" / ("0" * 40)
    (storage / "refs").mkdir(parents=True)
    (storage / "refs" / "main").write_text(snapshot.name, encoding="ascii")
    transformers_checkpoint(snapshot)
    source = resolve("openai/whisper-tiny", cache_dir=tmp_path, offline=True)
    assert (source.path, source.origin, source.format) == (snapshot.resolve(), "hub", TRANSFORMERS)
