"""The engines the service can run, by name (``ASRSERVE_ENGINE``).

An :class:`EngineKind` is everything the node wiring asks of an engine before it has a
replica: which devices it runs on and what they are called, what the weights run in, how
models are described without loading them (an API node validates requests against that)
and how replicas are loaded. A loaded replica then declares what it supports itself
(:attr:`asrserve.engine.base.Engine.capabilities`). Adding an engine is an entry in
:data:`ENGINES`; nothing here imports an engine's runtime until that engine is asked for.
Every engine's functions take the engine settings (:class:`EngineSettings`); ``catalog``
and ``load``, which find the models, the model cache too (``Settings.model_cache``, which
joins the engine's ``model_cache_dir`` and the storage's data dir). :func:`load_engines`
(the engine factory the composition roots run) and :func:`served_models` take the whole
``Settings`` to join it.
``auto`` (the default) is not an engine but the choice of one for the device
(:mod:`asrserve.engine.choice`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asrserve.engine.choice import EngineChoice, choose
from asrserve.settings.registered import check_engine

if TYPE_CHECKING:
    from pathlib import Path

    from asrserve.engine.base import Engine
    from asrserve.engine.catalog import Catalog
    from asrserve.engine.layout import Layout
    from asrserve.settings import Settings
    from asrserve.settings.engine import EngineSettings


@dataclass(frozen=True)
class EngineKind:
    name: str
    devices: tuple[str, ...]  # the device kinds it runs on ("auto" picks among them)
    resolve_device: Callable[[EngineSettings], str]  # the configured device, "auto" resolved
    device_names: Callable[[EngineSettings, int], list[str]]  # each replica's device, by name
    compute_type: Callable[[str, str], str]  # (device, configured) -> what the weights run in
    layout: Callable[[EngineSettings], Layout]  # replicas × threads for the settings
    # the served models, described without loading (settings, model cache)
    catalog: Callable[[EngineSettings, Path], Catalog]
    # per device, a replica of each model (settings, model cache)
    load: Callable[[EngineSettings, Path], list[dict[str, Engine]]]


def _kind(name: str, loading: Any) -> EngineKind:
    """An engine from its loading module's functions (each engine's has the same names)."""
    return EngineKind(
        name=name,
        devices=loading.DEVICES,
        resolve_device=loading.resolve_device,
        device_names=loading.device_names,
        compute_type=loading.compute_type,
        layout=loading.layout,
        catalog=loading.catalog,
        load=loading.load,
    )


def _ctranslate2() -> EngineKind:
    from asrserve.engine import loading

    return _kind("ctranslate2", loading)


def _transformers() -> EngineKind:
    from asrserve.engine.pytorch import loading

    return _kind("transformers", loading)


ENGINES: dict[str, Callable[[], EngineKind]] = {
    "ctranslate2": _ctranslate2,
    "transformers": _transformers,
}
"""Each engine by name, made on first use (its runtime is imported only then)."""


def engine_choice(settings: EngineSettings) -> EngineChoice:
    """The engine that runs, and why (``auto`` resolved for the device)."""
    return choose(check_engine(settings.engine), settings.device)


def engine_kind(settings: EngineSettings) -> EngineKind:
    """The engine that runs."""
    return ENGINES[engine_choice(settings).engine]()


def load_engines(settings: Settings) -> list[dict[str, Engine]]:
    """Per device, a replica of every served model, on the engine that runs."""
    return engine_kind(settings).load(settings, settings.model_cache)


def served_models(settings: Settings) -> Catalog:
    """The served models, described by the engine that runs without loading them."""
    return engine_kind(settings).catalog(settings, settings.model_cache)
