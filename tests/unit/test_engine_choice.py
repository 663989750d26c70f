"""Which engine runs which device (``ASRSERVE_ENGINE=auto``), what the transformers engine
runs its weights in, and which model directories each engine takes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from asrserve.engine.base import ModelNotFoundError
from asrserve.engine.choice import Probes, choose
from asrserve.engine.loading import catalog as ctranslate2_catalog
from asrserve.engine.model_dirs import CTRANSLATE2, TRANSFORMERS
from asrserve.engine.pytorch import loading
from asrserve.engine.registry import engine_choice
from asrserve.engine.sources import resolve
from asrserve.engine.whisper import bundled_model_path
from asrserve.settings import Settings


def probes(ctranslate2: str | None, gpu: str | None) -> Probes:
    return Probes(lambda: ctranslate2, lambda: gpu, lambda: "torch 2.x, CUDA 13.0")


NO_CUBLAS = "CTranslate2 needs CUDA 12's cuBLAS (libcublas.so.12), which is not here"


@pytest.mark.parametrize(
    ("device", "ctranslate2", "gpu", "engine"),
    [
        ("cpu", None, "cuda", "ctranslate2"),  # the CPU: never asks the GPU
        ("cuda", None, "cuda", "ctranslate2"),  # CUDA 12 with cuBLAS: CTranslate2
        ("cuda", NO_CUBLAS, "cuda", "transformers"),  # CUDA 13 alone
        ("auto", "CTranslate2 sees no CUDA device", "cuda", "transformers"),  # Blackwell
        ("auto", "CTranslate2 sees no CUDA device", "mps", "transformers"),  # a Mac
        ("mps", None, None, "transformers"),
        ("auto", "CTranslate2 sees no CUDA device", None, "ctranslate2"),  # no GPU at all
    ],
)
def test_auto_picks_the_engine_that_runs_the_device(
    device: str, ctranslate2: str | None, gpu: str | None, engine: str
) -> None:
    assert choose("auto", device, probes(ctranslate2, gpu)).engine == engine


def test_the_choice_says_why() -> None:
    chosen = choose("auto", "cuda", probes(NO_CUBLAS, "cuda"))
    assert chosen.view() == {
        "configured": "auto",
        "engine": "transformers",
        "reason": f"{NO_CUBLAS}; PyTorch (torch 2.x, CUDA 13.0) runs this cuda device",
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
