"""``asrserve bench --engines A,B --ceiling``: each engine alone, its batch curve on the same
windows and layouts.

The files' chunks are prepared once (every engine takes faster-whisper's log-mel features,
so the windows and their features are the same for each). Then, for each layout, each
repetition runs every engine in a fresh process of its own (``ceiling_layout.py``), the
engines' order reversed every other repetition (A B, B A, A B...), so that a slow minute of
the machine falls on both. A row is the median of its repetitions with their min and max,
as the ceiling's; each engine's rows make a :class:`~asrserve.bench.ceiling.Ceiling` of its
own, its best row that engine's ceiling.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from asrserve.bench.ceiling import Ceiling, layout_rows, layouts, prepare_modes
from asrserve.bench.ceiling_layout import (
    LayoutPlan,
    LayoutResult,
    Measure,
    Modes,
    Repeats,
    features_mib,
    in_child,
    window_batches,
    write_features,
)
from asrserve.bench.load import AudioFile
from asrserve.engine.layout import usable_cores
from asrserve.settings import Settings

Layouts = Sequence[tuple[int, int]]


@dataclass(frozen=True)
class CurvePlan:
    engines: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    repeats: Repeats
    windows: tuple[str, ...]
    layouts: Layouts | None = None  # None: every layout that fills the usable cores


@dataclass(frozen=True)
class EngineCurves:
    engines: tuple[str, ...]
    ceilings: dict[str, Ceiling]  # by engine
    mean_batch: dict[tuple[str, int], float]  # (window mode, batch size) -> chunks per batch


def turns(engines: Sequence[str], repetitions: int) -> list[tuple[int, str]]:
    """(repetition, engine) in the order they run: A B, then B A, then A B..."""
    return [
        (repetition, engine)
        for repetition in range(repetitions)
        for engine in (engines if repetition % 2 == 0 else list(reversed(engines)))
    ]


def mean_batches(modes: Modes, sizes: Sequence[int], passes: int) -> dict[tuple[str, int], float]:
    """Chunks per batch of each (window mode, batch size): under the size where a window
    has fewer chunks than it, or a remainder."""
    return {
        (name, size): len(chunks) * passes / len(window_batches(list(chunks) * passes, size))
        for name, chunks in modes.items()
        if chunks
        for size in sizes
    }


def merge(runs: Sequence[LayoutResult]) -> LayoutResult:
    """One layout's repetitions, each from a child of its own, as one child's result: every
    measurement's walls together, the highest memory figures."""
    first = runs[0]
    measures = []
    for index, measure in enumerate(first.measures):
        same = [run.measures[index] for run in runs]
        peaks = [m.peak_kib for m in same]
        peak = None if None in peaks else max(p for p in peaks if p is not None)
        walls = tuple(wall for m in same for wall in m.walls_s)
        measures.append(Measure(measure.windows, measure.batch_size, measure.batches, walls, peak))
    after_load = max(run.after_load_kib for run in runs)
    return LayoutResult(
        first.replicas, first.threads, after_load, max(r.peak_kib for r in runs), measures
    )


def measure_curves(files: list[AudioFile], settings: Settings, plan: CurvePlan) -> EngineCurves:
    """Every engine at every layout, batch size and window mode, interleaved."""
    audio = sum(f.duration for f in files)
    first = settings.model_copy(update={"engine": plan.engines[0]})
    modes, preprocessing = prepare_modes(files, first, plan.windows)
    features = features_mib(modes)
    mean_batch = mean_batches(modes, plan.batch_sizes, plan.repeats.passes)
    once = Repeats(plan.repeats.passes, 1)
    runs: dict[str, dict[tuple[int, int], list[LayoutResult]]] = {e: {} for e in plan.engines}
    with tempfile.TemporaryDirectory(prefix="asrserve-engines-") as tmp:
        path = write_features(modes, Path(tmp))
        del modes
        for replicas, threads in plan.layouts or layouts(usable_cores()):
            for repetition, engine in turns(plan.engines, plan.repeats.repetitions):
                on = settings.model_copy(update={"engine": engine})
                child = LayoutPlan(replicas, threads, on, path, plan.batch_sizes, once)
                runs[engine].setdefault((replicas, threads), []).append(in_child(child))
                print(f"  {engine} alone {replicas}×{threads}, run {repetition + 1}: done")
    repetition_audio = audio * plan.repeats.passes
    ceilings = {
        engine: Ceiling(
            [
                row
                for results in by_layout.values()
                for row in layout_rows(merge(results), repetition_audio)
            ],
            audio,
            preprocessing,
            features,
            plan.repeats,
        )
        for engine, by_layout in runs.items()
    }
    return EngineCurves(plan.engines, ceilings, mean_batch)
