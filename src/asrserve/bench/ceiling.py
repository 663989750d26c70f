"""``asrserve bench --ceiling``: the most audio per second the engine alone gets through.

No server, no queue, no preprocessing in the timed part: the files' features are computed
once, then every CPU layout (replicas × threads filling the usable cores) runs them at each
batch size, in full 30 s windows and in bucketed ones, batches never mixing windows. Each
row runs the chunks several times over, and reports the median of its repetitions with
their min and max. The best median row is the ceiling every "× ceiling" figure of the bench
is taken against; a served policy cannot beat it on the same files, so its share says what
the serving path costs. Each layout's batch-1 row is that layout unbatched: the best row
over it is what batching gains in the engine itself.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrserve.audio.features import FULL_WINDOW_S, prepare
from asrserve.bench.ceiling_layout import (
    DEFAULT_REPEATS,
    LayoutPlan,
    LayoutResult,
    Modes,
    Repeats,
    features_mib,
    in_child,
    write_features,
)
from asrserve.bench.load import AudioFile
from asrserve.engine.layout import usable_cores
from asrserve.settings import Settings

BATCH_SIZES = (1, 2, 4, 8, 16, 32)
WINDOW_MODES = ("full", "bucketed")
MAX_SECONDS = 4 * 3600.0


@dataclass(frozen=True)
class CeilingRow:
    replicas: int
    threads: int
    windows: str  # "full" or "bucketed"
    batch_size: int
    audio_per_wall: float  # the median of the repetitions
    low: float  # the slowest repetition's audio s / wall s
    high: float  # the fastest's
    wall_s: float  # the median repetition's wall time
    after_load_mib: float
    peak_mib: float

    @property
    def layout(self) -> str:
        return f"{self.replicas}×{self.threads}"

    def describe(self) -> str:
        return f"{self.layout}, {self.windows} windows, batch {self.batch_size}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "threads": self.threads,
            "windows": self.windows,
            "batch_size": self.batch_size,
            "audio_s_per_wall_s": round(self.audio_per_wall, 3),
            "audio_s_per_wall_s_min": round(self.low, 3),
            "audio_s_per_wall_s_max": round(self.high, 3),
            "wall_s": round(self.wall_s, 3),
            "after_load_mib": round(self.after_load_mib, 1),
            "peak_mib": round(self.peak_mib, 1),
        }


@dataclass(frozen=True)
class Ceiling:
    rows: list[CeilingRow]
    audio_s: float  # the files' audio, once
    preprocessing: dict[str, float]  # window mode -> audio s per wall s, one thread
    features_mib: float  # the precomputed features every child holds
    repeats: Repeats = DEFAULT_REPEATS

    @property
    def best(self) -> CeilingRow:
        return max(self.rows, key=lambda row: row.audio_per_wall)

    def unbatched(self, row: CeilingRow) -> CeilingRow | None:
        """The batch-1 row of ``row``'s layout and window mode, where one ran."""
        return next(
            (
                other
                for other in self.rows
                if (other.layout, other.windows, other.batch_size) == (row.layout, row.windows, 1)
            ),
            None,
        )

    def batching_gain(self) -> float | None:
        """The ceiling over the batch-1 row of its layout and windows: what batching itself
        gains in the engine."""
        one = self.unbatched(self.best)
        return None if one is None else self.best.audio_per_wall / one.audio_per_wall

    def as_dict(self) -> dict[str, Any]:
        gain = self.batching_gain()
        return {
            "audio_s": round(self.audio_s, 2),
            "passes": self.repeats.passes,
            "repetitions": self.repeats.repetitions,
            "audio_s_per_wall_s": round(self.best.audio_per_wall, 3),
            "best": self.best.as_dict(),
            "x_batch_1": None if gain is None else round(gain, 3),
            "preprocessing_audio_s_per_wall_s_per_thread": {
                mode: round(value, 3) for mode, value in self.preprocessing.items()
            },
            "features_mib": round(self.features_mib, 1),
            "rows": [row.as_dict() for row in self.rows],
        }


def layouts(cores: int) -> list[tuple[int, int]]:
    """Every replicas × threads that uses exactly ``cores`` cores, fewest replicas first."""
    return [(r, cores // r) for r in range(1, cores + 1) if cores % r == 0]


def window_modes(
    settings: Settings, names: tuple[str, ...] = WINDOW_MODES
) -> dict[str, tuple[float, ...]]:
    modes = {"full": (FULL_WINDOW_S,), "bucketed": tuple(settings.encoder_windows_s)}
    return {name: modes[name] for name in names}


def prepare_modes(
    files: list[AudioFile], settings: Settings, names: tuple[str, ...] = WINDOW_MODES
) -> tuple[Modes, dict[str, float]]:
    """Each window mode's chunks of all files, and its preprocessing throughput (decode,
    VAD and features: audio s per wall s on one thread). A multilingual model is served in
    full windows only (its ``Engine.capabilities``), so it gets no bucketed mode."""
    from asrserve.engine.registry import load_engines

    one = settings.model_copy(update={"cpu_replicas": 1, "cpu_threads": 1})
    engine = next(iter(load_engines(one)[0].values()))
    audio = sum(f.duration for f in files)
    modes: Modes = {}
    throughput: dict[str, float] = {}
    try:
        for name, windows in window_modes(settings, names).items():
            if engine.multilingual and name != "full":
                continue
            start = time.perf_counter()
            prepared = [
                prepare(f.path, engine, max_seconds=MAX_SECONDS, vad=True, windows=windows)
                for f in files
            ]
            throughput[name] = audio / (time.perf_counter() - start)
            modes[name] = [chunk for p in prepared for chunk in p.chunks]
    finally:
        engine.unload()  # the children load their own; the parent keeps only the features
    return modes, throughput


def measure_ceiling(
    files: list[AudioFile],
    settings: Settings,
    batch_sizes: tuple[int, ...] = BATCH_SIZES,
    repeats: Repeats = DEFAULT_REPEATS,
    windows: tuple[str, ...] = WINDOW_MODES,
    chosen: tuple[tuple[int, int], ...] | None = None,
) -> Ceiling:
    """Every layout (or the ``chosen`` ones) in a fresh process of its own, one after
    another."""
    audio = sum(f.duration for f in files)
    modes, preprocessing = prepare_modes(files, settings, windows)
    features = features_mib(modes)
    rows: list[CeilingRow] = []
    with tempfile.TemporaryDirectory(prefix="asrserve-ceiling-") as tmp:
        path = write_features(modes, Path(tmp))
        del modes
        for replicas, threads in chosen or layouts(usable_cores()):
            plan = LayoutPlan(replicas, threads, settings, path, batch_sizes, repeats)
            rows.extend(layout_rows(in_child(plan), audio * repeats.passes))
            print(f"  ceiling {replicas}×{threads}: done", flush=True)
    return Ceiling(rows, audio, preprocessing, features, repeats)


def layout_rows(result: LayoutResult, audio_s: float) -> list[CeilingRow]:
    """A child's measurements as table rows (``audio_s``: the audio of one repetition; a
    row's peak: its own where the kernel let the child reset the high-water mark, else the
    child's overall)."""
    rows = []
    for m in result.measures:
        wall = statistics.median(m.walls_s)
        rows.append(
            CeilingRow(
                result.replicas,
                result.threads,
                m.windows,
                m.batch_size,
                audio_s / wall,
                audio_s / max(m.walls_s),
                audio_s / min(m.walls_s),
                wall,
                result.after_load_kib / 1024,
                (m.peak_kib if m.peak_kib is not None else result.peak_kib) / 1024,
            )
        )
    return rows


def ceiling_table(ceiling: Ceiling) -> str:
    lines = [
        "| layout | windows | batch | audio s / wall s (median) | min – max | × batch 1 "
        "| after load MiB | peak MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    best = ceiling.best
    for row in ceiling.rows:
        figure = f"{row.audio_per_wall:.2f}"
        one = ceiling.unbatched(row)
        over = "–" if one is None else f"{row.audio_per_wall / one.audio_per_wall:.2f}×"
        lines.append(
            f"| {row.layout} | {row.windows} | {row.batch_size} "
            f"| {f'**{figure}**' if row is best else figure} | {row.low:.2f} – {row.high:.2f} "
            f"| {over} | {row.after_load_mib:.0f} | {row.peak_mib:.0f} |"
        )
    prep = ", ".join(f"{mode} {value:.2f}" for mode, value in ceiling.preprocessing.items())
    gain = ceiling.batching_gain()
    repeats = ceiling.repeats
    lines += [
        "",
        f"{ceiling.audio_s:.1f} s of audio, {repeats.passes} times over per run, median of "
        f"{repeats.repetitions} runs; preprocessing (decode + VAD + features, one thread): "
        f"{prep} audio s / wall s; peaks include {ceiling.features_mib:.0f} MiB of "
        "precomputed features",
        f"ceiling: {best.describe()}: {best.audio_per_wall:.2f} audio s / wall s"
        + ("" if gain is None else f", {gain:.2f}× its layout's batch-1 row"),
    ]
    return "\n".join(lines)
