"""Finding, describing and loading a faster-whisper (CTranslate2) model.

``catalog`` reads the served models' directories without loading them, so an API node that
runs no inference can still validate requests; ``load`` makes the replicas the scheduler runs
on, a replica of every model on every device.
Everything CTranslate2-specific about loading lives here, not in the node wiring: the node
reaches it through :mod:`asrserve.engine.registry`.
"""

from __future__ import annotations

import json
from pathlib import Path

from asrserve.engine.base import Engine, ModelInfo, ModelNotFoundError
from asrserve.engine.catalog import Catalog
from asrserve.engine.layout import Layout, cpu_layout, usable_cores
from asrserve.engine.model_dirs import CTRANSLATE2, MULTILINGUAL_VOCABULARY
from asrserve.engine.sources import ModelSource, resolve_models
from asrserve.engine.whisper import EngineConfig, FasterWhisperEngine
from asrserve.settings.engine import EngineSettings

DEVICES = ("cpu", "cuda")


def describe(source: ModelSource, beam_size: int) -> ModelInfo:
    """What the API validates requests against, read from the model directory."""
    multilingual = vocabulary_size(source.path) >= MULTILINGUAL_VOCABULARY
    size = weights_bytes(source.path)
    return ModelInfo(source.id, multilingual, beam_size, size, source.keep_alive)


def catalog(settings: EngineSettings, model_cache: Path) -> Catalog:
    """The served models, read from their directories (nothing is loaded)."""
    served = sources(settings, model_cache)
    return Catalog.of([describe(source, settings.beam_size) for source in served])


def sources(settings: EngineSettings, model_cache: Path) -> list[ModelSource]:
    """The served models, each a CTranslate2 conversion: a transformers checkpoint is the
    other engine's to run."""
    found = resolve_models(settings, model_cache)
    for source in found:
        if source.format != CTRANSLATE2:
            raise ModelNotFoundError(
                f"model {source.name!r} ({source.path}) is a {source.format} checkpoint, which"
                " CTranslate2 cannot load: serve it with ASRSERVE_ENGINE=transformers, or name"
                " a CTranslate2 conversion of it"
            )
    return found


def weights_bytes(path: Path) -> int:
    """The size of a model's weights on disk (``model.bin``)."""
    return (path / "model.bin").stat().st_size


def vocabulary_size(path: Path) -> int:
    """Tokens in a converted model's vocabulary (``vocabulary.txt``, else ``.json``)."""
    text = path / "vocabulary.txt"
    if text.is_file():
        with text.open("rb") as handle:
            return sum(1 for _ in handle)
    return len(json.loads((path / "vocabulary.json").read_text(encoding="utf-8")))


def resolve_device(settings: EngineSettings) -> str:
    """``cpu`` or ``cuda``: ``auto`` is CUDA when CTranslate2 sees a CUDA device."""
    if settings.device != "auto":
        return settings.device
    import ctranslate2

    return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"


def compute_type(device: str, configured: str) -> str:
    """What the weights run in: ``default`` is float16 on CUDA, int8 on the CPU."""
    if configured != "default":
        return configured
    return "float16" if device == "cuda" else "int8"


def device_names(settings: EngineSettings, replicas: int) -> list[str]:
    """The replicas' devices by name: ``cuda:N`` for each CUDA device index, else ``cpu:N``
    for each CPU replica (a share of the cores)."""
    device = resolve_device(settings)
    indices = settings.device_index if device == "cuda" else range(replicas)
    return [f"{device}:{index}" for index in indices][:replicas]


def layout(settings: EngineSettings) -> Layout:
    """Replicas × threads per replica on the CPU (``auto``: from the usable cores); on
    CUDA, a replica per device index."""
    if resolve_device(settings) == "cuda":
        return Layout(len(settings.device_index), 0, "cuda: a replica per device")
    return cpu_layout(settings.cpu_replicas, settings.cpu_threads, usable_cores())


def load(settings: EngineSettings, model_cache: Path) -> list[dict[str, Engine]]:
    """Per device (each CUDA device index, or each CPU replica: a share of the cores), a
    replica of every served model, by model id (the default model's first). The CPU
    replicas of a model share one copy of its weights."""
    served = sources(settings, model_cache)
    device = resolve_device(settings)
    compute = compute_type(device, settings.compute_type)
    if device == "cuda":
        per_model = {
            source.id: [
                engine
                for index in settings.device_index
                for engine in FasterWhisperEngine.replicas(
                    EngineConfig(
                        source.path,
                        source.id,
                        device,
                        index,
                        compute,
                        0,
                        fallback=settings.fallback_temperatures,
                        keep_alive=source.keep_alive,
                    )
                )
            ]
            for source in served
        }
        count = len(settings.device_index)
    else:
        shape = cpu_layout(settings.cpu_replicas, settings.cpu_threads, usable_cores())
        per_model = {
            source.id: FasterWhisperEngine.replicas(
                EngineConfig(
                    source.path,
                    source.id,
                    device,
                    0,
                    compute,
                    shape.threads,
                    shape.replicas,
                    settings.fallback_temperatures,
                    source.keep_alive,
                )
            )
            for source in served
        }
        count = shape.replicas
    return [{model: engines[slot] for model, engines in per_model.items()} for slot in range(count)]
