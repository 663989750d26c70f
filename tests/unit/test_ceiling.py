"""``asrserve bench --ceiling`` without a model: layouts, batching, the child's loop, the report."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from asrserve.bench.ceiling import Ceiling, CeilingRow, ceiling_table, layout_rows, layouts
from asrserve.bench.ceiling_layout import (
    LayoutPlan,
    LayoutResult,
    Measure,
    Repeats,
    measure_layout,
    window_batches,
)
from asrserve.bench.runner import report
from asrserve.engine.base import NEVER, ChunkInput, Engine, Pause, RawSegment, Settled, unheard
from asrserve.settings import Settings
from asrserve.vocabulary import TranscriptionOptions
from tests.support.fakes import FakeEngine


class WindowEngine(FakeEngine):
    """Records each batch as (window frames, duration) pairs, and the beam it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[list[tuple[int, float]]] = []
        self.beams: set[int] = set()

    def transcribe_batch(
        self,
        chunks: Sequence[ChunkInput],
        options: TranscriptionOptions,
        settled: Settled = unheard,
        pause: Pause = NEVER,
    ) -> list[list[RawSegment]]:
        self.seen.append([(c.features.shape[-1], c.duration) for c in chunks])
        self.beams.add(options.beam_size)
        return [[] for _ in chunks]


def chunk(frames: int, duration: float) -> ChunkInput:
    return ChunkInput(np.zeros((2, frames), dtype=np.float32), 0.0, duration)


def mixed_chunks() -> list[ChunkInput]:
    """Eleven chunks over three windows, out of order."""
    sizes = [(3000, 25.0), (500, 4.0), (1000, 8.0), (500, 2.0), (3000, 20.0), (1000, 9.0)]
    sizes += [(500, 3.0), (500, 1.0), (1000, 6.0), (500, 4.5), (3000, 28.0)]
    return [chunk(frames, duration) for frames, duration in sizes]


def row(layout: tuple[int, int], windows: str, size: int, speed: float) -> CeilingRow:
    return CeilingRow(layout[0], layout[1], windows, size, speed, speed, speed, 1.0, 300.0, 400.0)


@pytest.mark.parametrize(
    ("cores", "expected"),
    [(1, [(1, 1)]), (2, [(1, 2), (2, 1)]), (4, [(1, 4), (2, 2), (4, 1)])],
)
def test_layouts_fill_the_cores_exactly(cores: int, expected: list[tuple[int, int]]) -> None:
    assert layouts(cores) == expected


def test_batches_hold_one_window_each_and_at_most_the_size() -> None:
    batches = window_batches(mixed_chunks(), 3)
    assert all(len({c.features.shape[-1] for c in batch}) == 1 for batch in batches)
    assert max(len(batch) for batch in batches) == 3
    assert sorted(c.duration for batch in batches for c in batch) == sorted(
        c.duration for c in mixed_chunks()
    )


def test_batches_put_like_durations_together() -> None:
    batches = window_batches(mixed_chunks(), 3)
    assert [[c.duration for c in batch] for batch in batches] == [
        [1.0, 2.0, 3.0],
        [4.0, 4.5],
        [6.0, 8.0, 9.0],
        [20.0, 25.0, 28.0],
    ]


def test_best_is_the_fastest_row() -> None:
    rows = [row((1, 2), "full", 4, 10.0), row((2, 1), "bucketed", 16, 12.5)]
    rows.append(row((2, 1), "full", 32, 11.0))
    assert Ceiling(rows, 100.0, {"full": 50.0}, 8.0).best is rows[1]


def test_table_names_the_best_row() -> None:
    rows = [row((1, 2), "full", 4, 10.0), row((2, 1), "bucketed", 16, 12.5)]
    table = ceiling_table(Ceiling(rows, 100.0, {"full": 50.0, "bucketed": 48.0}, 8.0))
    assert table.splitlines()[-1] == (
        "ceiling: 2×1, bucketed windows, batch 16: 12.50 audio s / wall s"
    )


def test_batchings_gain_is_the_ceiling_over_its_layouts_batch_1_row() -> None:
    rows = [row((2, 1), "bucketed", 1, 5.0), row((2, 1), "bucketed", 4, 12.5)]
    rows += [row((1, 2), "bucketed", 1, 10.0), row((2, 1), "full", 1, 2.0)]
    ceiling = Ceiling(rows, 100.0, {"bucketed": 48.0}, 8.0)
    assert (ceiling.batching_gain(), ceiling.as_dict()["x_batch_1"]) == (2.5, 2.5)
    assert "| 2×1 | bucketed | 4 | **12.50** | 12.50 – 12.50 | 2.50× |" in ceiling_table(ceiling)


def test_bench_report_takes_rows_against_the_best() -> None:
    rows = [row((1, 2), "full", 4, 10.0), row((2, 1), "bucketed", 16, 12.5)]
    text = report([], Ceiling(rows, 100.0, {"full": 50.0}, 8.0))
    assert "ceiling (engine only, no server: 2×1, bucketed windows, batch 16): 12.50" in text


def test_a_row_keeps_its_own_peak_where_the_child_measured_one() -> None:
    result = LayoutResult(2, 1, 1024, 4096, [Measure("full", 4, 3, (2.0,), 2048)])
    assert [(r.audio_per_wall, r.after_load_mib, r.peak_mib) for r in layout_rows(result, 10)] == [
        (5.0, 1.0, 2.0)
    ]


def test_a_row_is_the_median_repetition_with_the_slowest_and_fastest() -> None:
    result = LayoutResult(2, 1, 1024, 4096, [Measure("full", 4, 3, (4.0, 2.0, 5.0), 2048)])
    [made] = layout_rows(result, 20.0)
    assert (made.audio_per_wall, made.low, made.high, made.wall_s) == (5.0, 4.0, 10.0, 4.0)


def test_a_row_falls_back_to_the_childs_peak() -> None:
    result = LayoutResult(2, 1, 1024, 4096, [Measure("full", 4, 3, (2.0,), None)])
    assert layout_rows(result, 10.0)[0].peak_mib == 4.0


def fake_layout(tmp_path: Path) -> tuple[LayoutResult, list[WindowEngine], list[Settings]]:
    """``measure_layout`` in-process on two fake replicas, two modes and two batch sizes."""
    features = tmp_path / "features.pickle"
    modes = {"full": [chunk(3000, 5.0), chunk(3000, 7.0)], "bucketed": mixed_chunks()}
    features.write_bytes(pickle.dumps(modes))
    engines = [WindowEngine(), WindowEngine()]
    asked: list[Settings] = []

    def load(settings: Settings) -> list[dict[str, Engine]]:
        asked.append(settings)
        return [{"fake": engine} for engine in engines]

    plan = LayoutPlan(2, 1, Settings(beam_size=3), features, (4, 16), Repeats(2, 3))
    return measure_layout(plan, load), engines, asked


def test_the_child_loads_its_layout(tmp_path: Path) -> None:
    _, _, asked = fake_layout(tmp_path)
    assert [(s.cpu_replicas, s.cpu_threads) for s in asked] == [(2, 1)]


def test_the_child_measures_every_mode_and_size(tmp_path: Path) -> None:
    result, _, _ = fake_layout(tmp_path)
    """Two passes over the chunks per run: 4 full chunks, 22 bucketed (10 + 8 + 4 over
    three windows), batched at 4 and at 16; three runs each."""
    assert [(m.windows, m.batch_size, m.batches, len(m.walls_s)) for m in result.measures] == [
        ("full", 4, 1, 3),
        ("full", 16, 1, 3),
        ("bucketed", 4, 7, 3),
        ("bucketed", 16, 3, 3),
    ]


def test_the_child_runs_each_chunk_passes_times_per_run_after_a_warm_up(tmp_path: Path) -> None:
    _, engines, _ = fake_layout(tmp_path)
    ran = sorted(d for e in engines for batch in e.seen for _, d in batch)
    once = [5.0, 7.0] + [c.duration for c in mixed_chunks()]
    warm_up = [1.0, 2.0, 3.0, 4.0] * 2  # the shortest window's first batch, on each replica
    assert ran == sorted(once * 2 * 2 * 3 + warm_up)  # 2 batch sizes, 2 passes, 3 runs


def test_the_child_never_mixes_windows_and_uses_the_configured_beam(tmp_path: Path) -> None:
    _, engines, _ = fake_layout(tmp_path)
    batches = [batch for e in engines for batch in e.seen]
    assert all(len({frames for frames, _ in batch}) == 1 for batch in batches)
    assert set().union(*(e.beams for e in engines)) == {3}
