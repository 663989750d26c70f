"""What the scenarios of the engine alone (``bench fallback``, ``bench keywords``) share:
the corpus's windows cut as the service cuts them, and the figures of a side's timed runs."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from asrserve.audio.features import prepare
from asrserve.engine.base import ChunkInput, Engine
from asrserve.settings import Settings

MAX_SECONDS = 4 * 3600.0


def service_windows(
    paths: Sequence[Path], engine: Engine, settings: Settings
) -> list[list[ChunkInput]]:
    """Each file's windows as the service cuts them: VAD, then the encoder windows the
    settings and the engine allow."""
    windows = engine.capabilities.windows(settings.windows)
    return [
        prepare(path, engine, max_seconds=MAX_SECONDS, vad=True, windows=windows).chunks
        for path in paths
    ]


def wall_figures(walls: Sequence[float], audio_s: float) -> dict[str, float]:
    """A side's runs: the median, least and most wall seconds, and audio seconds a second
    at the median."""
    median = statistics.median(walls)
    return {
        "median_wall_s": round(median, 3),
        "min_wall_s": round(min(walls), 3),
        "max_wall_s": round(max(walls), 3),
        "audio_s_per_s": round(audio_s / median, 1),
    }
