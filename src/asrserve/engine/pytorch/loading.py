"""Finding, describing and loading models on the ``transformers`` engine.

Every source a model can come from works here: a transformers checkpoint is loaded as it
is; a CTranslate2 conversion (the packaged tiny.en and base, faster-whisper's hub repos) is
converted once into the model cache (``convert.py``). ``catalog`` reads the directories
without loading (or converting) anything.
"""

from __future__ import annotations

import json
from pathlib import Path

from asrserve.engine.base import Engine, ModelInfo, ModelNotFoundError
from asrserve.engine.catalog import Catalog
from asrserve.engine.layout import Layout, cpu_layout, usable_cores
from asrserve.engine.loading import vocabulary_size
from asrserve.engine.model_dirs import MULTILINGUAL_VOCABULARY, TRANSFORMERS, WEIGHT_FILES
from asrserve.engine.sources import ModelSource, resolve_models
from asrserve.settings.engine import EngineSettings

DEVICES = ("cpu", "cuda", "mps")
DTYPES = ("float32", "float16", "bfloat16")


def describe(source: ModelSource, beam_size: int) -> ModelInfo:
    """What the API validates requests against, read from the model's files."""
    if source.format == TRANSFORMERS:
        config = json.loads((source.path / "config.json").read_text(encoding="utf-8"))
        vocabulary = int(config.get("vocab_size", 0))
        size = sum(f.stat().st_size for n in WEIGHT_FILES if (f := source.path / n).is_file())
    else:
        vocabulary = vocabulary_size(source.path)
        size = (source.path / "model.bin").stat().st_size
    multilingual = vocabulary >= MULTILINGUAL_VOCABULARY
    return ModelInfo(source.id, multilingual, beam_size, size, source.keep_alive)


def catalog(settings: EngineSettings, model_cache: Path) -> Catalog:
    served = resolve_models(settings, model_cache)
    return Catalog.of([describe(source, settings.beam_size) for source in served])


def resolve_device(settings: EngineSettings) -> str:
    """``cpu``, ``cuda`` (NVIDIA, or AMD under ROCm: PyTorch names both so) or ``mps``
    (Apple): ``auto`` is the first PyTorch sees."""
    if settings.device != "auto":
        return settings.device
    from asrserve.engine.pytorch import devices

    return devices.gpu() or "cpu"


def compute_type(device: str, configured: str) -> str:
    """What the weights run in: ``default`` is float16 on a GPU (Whisper's own inference
    precision), float32 on the CPU; ``float32``, ``float16`` and ``bfloat16`` as asked."""
    if configured == "default":
        return "float32" if device == "cpu" else "float16"
    if configured not in DTYPES:
        raise ModelNotFoundError(
            f"compute type {configured!r} is not one the transformers engine runs"
            f" ({', '.join(DTYPES)}, or default)"
        )
    return configured


def device_names(settings: EngineSettings, replicas: int) -> list[str]:
    device = resolve_device(settings)
    if device == "cuda":
        return [f"cuda:{index}" for index in settings.device_index][:replicas]
    return [f"{device}:{index}" for index in range(replicas)]


def layout(settings: EngineSettings) -> Layout:
    """Replicas × threads on the CPU as CTranslate2's (``engine/layout.py``); a replica
    per CUDA device; one on Apple's GPU."""
    device = resolve_device(settings)
    if device == "cuda":
        return Layout(len(settings.device_index), 0, "cuda: a replica per device")
    if device == "mps":
        return Layout(1, 0, "mps: one replica")
    return cpu_layout(settings.cpu_replicas, settings.cpu_threads, usable_cores())


def model_dir(source: ModelSource, cache_dir: Path) -> Path:
    """The transformers checkpoint of ``source``: itself, or its conversion."""
    if source.format == TRANSFORMERS:
        return source.path
    from asrserve.engine.pytorch.convert import converted

    return converted(source.path, cache_dir, source.id)


def load(settings: EngineSettings, model_cache: Path) -> list[dict[str, Engine]]:
    """Per device (each CUDA device index, Apple's GPU, or each CPU replica: a share of the
    cores), a replica of every served model; the CPU replicas of a model share its weights."""
    from asrserve.engine.pytorch.engine import TorchConfig, TransformersEngine

    device = resolve_device(settings)
    dtype = compute_type(device, settings.compute_type)
    shape = layout(settings)
    threads = max(1, shape.threads)
    names = device_names(settings, shape.replicas)
    per_model: dict[str, list[Engine]] = {}
    for source in resolve_models(settings, model_cache):
        folder = model_dir(source, model_cache)
        fallback, keep_alive = settings.fallback_temperatures, source.keep_alive
        if device == "cpu":
            config = TorchConfig(folder, source.id, "cpu", dtype, threads, fallback, keep_alive)
            per_model[source.id] = list(TransformersEngine.replicas(config, shape.replicas))
            continue
        per_model[source.id] = [
            TransformersEngine(
                TorchConfig(folder, source.id, _torch_device(name), dtype, 1, fallback, keep_alive)
            )
            for name in names
        ]
    count = len(names)
    return [{model: engines[slot] for model, engines in per_model.items()} for slot in range(count)]


def _torch_device(name: str) -> str:
    """PyTorch's name of a device: ``cuda:N`` as it is, Apple's GPU plain ``mps``."""
    return "mps" if name.startswith("mps") else name
