"""How the CPU cores are shared out between replicas, and replicas sharing weights."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from asrserve.engine import loading, whisper
from asrserve.engine.base import Engine
from asrserve.engine.layout import MAX_AUTO_REPLICAS, Layout, cpu_layout
from asrserve.engine.whisper import FasterWhisperEngine
from asrserve.settings import Settings


def _load(settings: Settings) -> list[dict[str, Engine]]:
    return loading.load(settings, settings.model_cache)


@pytest.mark.parametrize(
    ("cores", "replicas", "threads"), [(1, 1, 1), (2, 2, 1), (8, 8, 1), (16, 8, 2), (12, 8, 1)]
)
def test_auto_gives_a_replica_per_core_up_to_the_cap(
    cores: int, replicas: int, threads: int
) -> None:
    layout = cpu_layout("auto", "auto", cores)
    assert (layout.replicas, layout.threads) == (replicas, threads)
    assert layout.replicas <= MAX_AUTO_REPLICAS


def test_settings_win_and_auto_fills_the_rest() -> None:
    assert cpu_layout(3, 2, 16) == Layout(3, 2, "settings")
    assert (cpu_layout(1, "auto", 4).replicas, cpu_layout(1, "auto", 4).threads) == (1, 4)
    assert (cpu_layout(2, 0, 4).replicas, cpu_layout(2, 0, 4).threads) == (2, 2)
    assert (cpu_layout("auto", 2, 8).replicas, cpu_layout("auto", 2, 8).threads) == (4, 2)
    assert (cpu_layout("auto", 4, 2).replicas, cpu_layout("auto", 4, 2).threads) == (1, 4)


def test_the_environment_takes_auto_or_a_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASRSERVE_CPU_REPLICAS", "3")
    monkeypatch.setenv("ASRSERVE_CPU_THREADS", "auto")
    settings = Settings()
    assert (settings.cpu_replicas, settings.cpu_threads) == (3, "auto")


def test_cpu_replicas_share_one_copy_of_the_weights() -> None:
    """Two replicas of tiny.en: one set of weights, held while either replica holds it."""
    first, second = (
        cast(FasterWhisperEngine, engines["tiny.en"])
        for engines in _load(Settings(cpu_replicas=2, cpu_threads=1))
    )
    weights = first.weights
    assert second.weights is weights
    first.unload()
    assert (first.loaded, second.loaded, weights.loaded) == (False, True, True)
    second.unload()
    assert weights.loaded is False
    first.load()
    assert (first.loaded, second.loaded, weights.loaded) == (True, False, True)


class Busy:
    """CTranslate2's model while a batch of it is active: ``unload_model`` leaves it loaded."""

    def __init__(self, model: Any) -> None:  # ctranslate2.models.Whisper (untyped)
        self._model = model

    @property
    def model_is_loaded(self) -> bool:
        return bool(self._model.model_is_loaded)

    def unload_model(self) -> None:
        pass


def test_a_replica_whose_weights_ctranslate2_kept_still_reads_as_loaded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An unload that gave up left the weights in memory while /v1/models said not loaded
    and the log said released (issue 45)."""
    caplog.set_level(logging.INFO, logger=whisper.__name__)
    [engines] = _load(Settings(cpu_replicas=1, cpu_threads=1))
    engine = cast(FasterWhisperEngine, engines["tiny.en"])
    real = engine.weights.model.model
    monkeypatch.setattr(whisper, "_UNLOAD_RETRIES", (0.0,))
    monkeypatch.setattr(engine.weights.model, "model", Busy(real))
    engine.unload()
    assert (engine.loaded, engine.weights.loaded) == (True, True)
    assert "model tiny.en on cpu:0 kept loaded" in caplog.text
    assert "released model" not in caplog.text
    monkeypatch.setattr(engine.weights.model, "model", real)
    engine.unload()
    assert (engine.loaded, engine.weights.loaded) == (False, False)
    assert "released model tiny.en on cpu:0" in caplog.text
