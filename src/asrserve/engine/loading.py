"""Finding, describing and loading a faster-whisper (CTranslate2) model.

``describe`` reads the model directory without loading the model, so an API node that runs
no inference can still validate requests; ``load`` makes the replicas the scheduler runs on.
Everything CTranslate2-specific about loading lives here, not in the node wiring.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from asrserve.engine.base import Engine, ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.engine.whisper import (
    EngineConfig,
    FasterWhisperEngine,
    bundled_model_path,
    check_model_dir,
)
from asrserve.settings import Settings

MULTILINGUAL_VOCABULARY = 51865  # Whisper's English-only models have one token less


def model_path(settings: Settings) -> Path:
    """The configured model directory (the bundled tiny.en if none), checked to be a model."""
    return check_model_dir(settings.model or bundled_model_path())


def model_id(settings: Settings) -> str:
    return settings.model_id or ("tiny.en" if settings.model is None else model_path(settings).name)


def describe(settings: Settings) -> ModelInfo:
    """What the API validates requests against, read from the model directory."""
    size = vocabulary_size(model_path(settings))
    return ModelInfo(model_id(settings), size >= MULTILINGUAL_VOCABULARY, settings.beam_size)


def catalog(settings: Settings) -> Catalog:
    """The served models, read from their directories (nothing is loaded)."""
    return Catalog.of([describe(settings)])


def vocabulary_size(path: Path) -> int:
    """Tokens in a converted model's vocabulary (``vocabulary.txt``, else ``.json``)."""
    text = path / "vocabulary.txt"
    if text.is_file():
        with text.open("rb") as handle:
            return sum(1 for _ in handle)
    return len(json.loads((path / "vocabulary.json").read_text(encoding="utf-8")))


def resolve_device(settings: Settings) -> str:
    """``cpu`` or ``cuda``: ``auto`` is CUDA when CTranslate2 sees a CUDA device."""
    if settings.device != "auto":
        return settings.device
    import ctranslate2

    return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"


def load(settings: Settings) -> list[Engine]:
    """One replica per CUDA device index, or ``cpu_replicas`` replicas sharing the cores."""
    path = model_path(settings)
    device = resolve_device(settings)
    compute = settings.compute_type
    if compute == "default":
        compute = "float16" if device == "cuda" else "int8"
    if device == "cuda":
        slots = [(index, 0) for index in settings.device_index]
    else:
        threads = settings.cpu_threads or max(1, (os.cpu_count() or 1) // settings.cpu_replicas)
        slots = [(0, threads)] * settings.cpu_replicas
    return [
        FasterWhisperEngine(EngineConfig(path, model_id(settings), device, index, compute, threads))
        for index, threads in slots
    ]
