"""``asrserve bench --engines A,B`` without a model: the flags, the order the engines run in,
and the side-by-side report's ratios."""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import asrserve.engine.registry
from asrserve.bench import engine_curve
from asrserve.bench.arguments import check_engines, scenario_flags
from asrserve.bench.ceiling import Ceiling, CeilingRow
from asrserve.bench.ceiling_layout import (
    LayoutPlan,
    LayoutResult,
    Measure,
    Modes,
    Repeats,
    measure_layout,
)
from asrserve.bench.engine_curve import CurvePlan, EngineCurves, mean_batches, merge, turns
from asrserve.bench.engine_report import curve_body, curve_table, engines_body, gains
from asrserve.bench.engines import served_table, side_by_side
from asrserve.bench.load import AudioFile, LoadResult, Sample
from asrserve.bench.runner import Row, report
from asrserve.cli.main import parser
from asrserve.engine.base import ChunkInput, Engine
from asrserve.settings import Settings
from tests.support.fakes import FakeEngine

CT2, TORCH = "ctranslate2", "transformers"


def bench_args(*argv: str) -> argparse.Namespace:
    return scenario_flags(parser().parse_args(["bench", *argv]))


def test_engines_are_read_in_order() -> None:
    assert bench_args("--engines", "transformers,ctranslate2").engines == (TORCH, CT2)


@pytest.mark.parametrize("text", ["auto", "ctranslate2,onnx", "ctranslate2,ctranslate2", ","])
def test_engines_that_are_not_registered_once_each_are_refused(text: str) -> None:
    with pytest.raises(SystemExit):
        bench_args("--engines", text)


def test_ceiling_layouts_are_replicas_by_threads() -> None:
    assert bench_args("--ceiling-layouts", "2x1,1x2").ceiling_layouts == ((2, 1), (1, 2))


@pytest.mark.parametrize("text", ["2x0", "two", "2", "2x1x1"])
def test_a_malformed_ceiling_layout_is_refused(text: str) -> None:
    with pytest.raises(SystemExit):
        bench_args("--ceiling-layouts", text)


@pytest.mark.parametrize(
    ("argv", "refused"),
    [
        (["live", "2"], "not live"),
        (["curve"], "not curve"),
        (["--url", "http://127.0.0.1:8000"], "no --url"),
    ],
)
def test_engines_elsewhere_than_the_load_rows_are_refused(argv: list[str], refused: str) -> None:
    with pytest.raises(SystemExit, match=refused):
        check_engines(bench_args("--engines", "ctranslate2,transformers", *argv))


def test_engines_go_with_the_load_rows_and_the_ceiling() -> None:
    check_engines(bench_args("--engines", "ctranslate2,transformers", "--ceiling"))


def test_each_repetition_runs_the_engines_in_the_other_order() -> None:
    assert turns(["a", "b"], 3) == [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]


def test_children_merge_into_one_row_per_measurement() -> None:
    runs = [
        LayoutResult(2, 1, 100, 400, [Measure("full", 4, 3, (2.0,), 300)]),
        LayoutResult(2, 1, 120, 380, [Measure("full", 4, 3, (3.0,), 350)]),
    ]
    [measure] = merge(runs).measures
    assert (measure.walls_s, measure.peak_kib) == ((2.0, 3.0), 350)
    assert (merge(runs).after_load_kib, merge(runs).peak_kib) == (120, 400)


def test_a_merged_peak_is_unknown_where_one_child_could_not_measure_it() -> None:
    runs = [
        LayoutResult(2, 1, 100, 400, [Measure("full", 4, 3, (2.0,), 300)]),
        LayoutResult(2, 1, 100, 400, [Measure("full", 4, 3, (3.0,), None)]),
    ]
    assert merge(runs).measures[0].peak_kib is None


def chunks(frames: int, count: int) -> list[ChunkInput]:
    return [ChunkInput(np.zeros((2, frames), dtype=np.float32), 0.0, 5.0) for _ in range(count)]


def test_mean_batch_is_chunks_per_batch_within_each_window() -> None:
    """10 chunks twice over: 20 at batch 8 are 8 + 8 + 4; 7 + 3 bucketed chunks twice over
    at batch 8 are 8 + 6 and 6 (a window never fills another's batch)."""
    modes = {"full": chunks(3000, 10), "bucketed": chunks(500, 7) + chunks(1000, 3)}
    assert mean_batches(modes, (1, 8), 2) == {
        ("full", 1): 1.0,
        ("full", 8): pytest.approx(20 / 3),
        ("bucketed", 1): 1.0,
        ("bucketed", 8): pytest.approx(20 / 3),
    }


def test_the_child_loads_on_the_engine_its_settings_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    def load(settings: Settings) -> list[dict[str, Engine]]:
        asked.append(settings.engine)
        return [{"fake": FakeEngine()}]

    monkeypatch.setattr(asrserve.engine.registry, "load_engines", load)
    features = tmp_path / "features.pickle"
    features.write_bytes(pickle.dumps({"full": chunks(3000, 2)}))
    plan = LayoutPlan(1, 1, Settings(engine=TORCH), features, (1,), Repeats(1, 1))
    measure_layout(plan)
    assert asked == [TORCH]


def test_the_engines_alone_run_interleaved_each_on_its_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every layout, then each repetition A B / B A, each child on its own engine; each
    engine's rows are the median of its own children."""
    ran: list[tuple[str, int, int]] = []
    wall = {CT2: [1.0, 3.0, 4.0, 4.0], TORCH: [4.0, 8.0, 8.0, 8.0]}  # each one's children

    def in_child(plan: LayoutPlan) -> LayoutResult:
        ran.append((plan.settings.engine, plan.replicas, plan.threads))
        walls = (wall[plan.settings.engine].pop(0),)
        return LayoutResult(
            plan.replicas, plan.threads, 1024, 2048, [Measure("full", 1, 2, walls, 2048)]
        )

    def prepare(files: list[AudioFile], settings: Settings, names: Any) -> tuple[Modes, Any]:
        return {"full": chunks(3000, 2)}, {"full": 50.0}

    monkeypatch.setattr(engine_curve, "in_child", in_child)
    monkeypatch.setattr(engine_curve, "prepare_modes", prepare)
    files = [AudioFile(Path("a.wav"), 4.0, None, b"")]
    plan = CurvePlan((CT2, TORCH), (1,), Repeats(2, 2), ("full",), ((2, 1), (1, 2)))
    curves = engine_curve.measure_curves(files, Settings(), plan)
    assert ran == [
        (CT2, 2, 1),
        (TORCH, 2, 1),
        (TORCH, 2, 1),
        (CT2, 2, 1),
        (CT2, 1, 2),
        (TORCH, 1, 2),
        (TORCH, 1, 2),
        (CT2, 1, 2),
    ]
    # 4 s of audio twice over per run: 8 s over the median of its two runs, per layout
    assert [r.audio_per_wall for r in curves.ceilings[CT2].rows] == [8.0 / 2.0, 8.0 / 4.0]
    assert [r.audio_per_wall for r in curves.ceilings[TORCH].rows] == [8.0 / 6.0, 8.0 / 8.0]


def served_row(policy: str, engine: str, pattern: str, speed: float) -> Row:
    """A row whose answers come to ``speed`` audio s per wall s (one 10 s file)."""
    clip = AudioFile(Path("a.wav"), 10.0, None, b"")
    result = LoadResult(wall=10.0 / speed, samples=[Sample(clip, 1.0, 200, "x")])
    return Row(policy, pattern, result, {"mean_batch_size": 1.0}, 0.05, engine)


def served_rows() -> list[Row]:
    return [
        served_row("greedy", CT2, "16 clients", 40.0),
        served_row("greedy", TORCH, "16 clients", 10.0),
        served_row("unbatched", CT2, "16 clients", 50.0),
        served_row("unbatched", TORCH, "16 clients", 8.0),
    ]


def test_served_rows_pair_up_by_policy_and_load() -> None:
    pairs = side_by_side(served_rows())
    assert [(p.policy, p.pattern, sorted(p.rows)) for p in pairs] == [
        ("greedy", "16 clients", [CT2, TORCH]),
        ("unbatched", "16 clients", [CT2, TORCH]),
    ]
    assert [p.over(TORCH, CT2) for p in pairs] == [0.25, 0.16]


def test_the_served_table_ends_with_each_engine_over_the_first() -> None:
    lines = served_table(side_by_side(served_rows()), (CT2, TORCH)).splitlines()
    assert lines[0].endswith("| transformers ÷ ctranslate2 |")
    assert [line.rsplit("|", 2)[1].strip() for line in lines[2:]] == ["0.25×", "0.16×"]


def test_a_baseline_is_taken_on_the_rows_own_engine() -> None:
    """× unbatched: greedy on PyTorch over unbatched on PyTorch, not on CTranslate2."""
    table = report(served_rows(), None, ["unbatched"])
    assert "| greedy (transformers) | 16 clients |" in table
    rows = {line.split("|")[1].strip(): line.split("|")[-3].strip() for line in table.splitlines()}
    assert (rows["greedy (ctranslate2)"], rows["greedy (transformers)"]) == ("0.80×", "1.25×")


def curve_row(engine_speed: float, size: int) -> CeilingRow:
    return CeilingRow(2, 1, "full", size, engine_speed, engine_speed, engine_speed, 1.0, 1.0, 1.0)


def curves() -> EngineCurves:
    """CTranslate2 slows down with the batch, PyTorch speeds up."""
    ct2 = Ceiling([curve_row(40.0, 1), curve_row(30.0, 32)], 100.0, {"full": 1.0}, 1.0)
    torch = Ceiling([curve_row(8.0, 1), curve_row(12.0, 32)], 100.0, {"full": 1.0}, 1.0)
    return EngineCurves((CT2, TORCH), {CT2: ct2, TORCH: torch}, {("full", 32): 25.0})


def test_each_point_of_the_curve_has_both_engines_and_their_ratio() -> None:
    point = curve_body(curves())[1]
    assert (point[CT2]["x_batch_1"], point[TORCH]["x_batch_1"]) == (0.75, 1.5)
    assert (point["mean_batch"], point["over_ctranslate2"]) == (25.0, {TORCH: 0.4})


def test_the_gains_are_each_engines_largest_batch_over_batch_1() -> None:
    found = [g.as_dict() for g in gains(curves())]
    assert [(g["engine"], g["largest_x_batch_1"], g["best_batch"]) for g in found] == [
        (CT2, 0.75, 1),
        (TORCH, 1.5, 32),
    ]
    assert curve_table(curves()).splitlines()[-1] == (
        "transformers, 2×1 full: batch 32 ÷ batch 1 = 1.50×; best batch 32 "
        "(12.00 audio s / s, 1.50× batch 1)"
    )


def test_the_json_holds_both_sides_and_each_engines_own_ceiling() -> None:
    body = engines_body(served_rows(), curves(), (CT2, TORCH), {CT2: "int8", TORCH: "float32"})
    assert body["served"][0]["over_ctranslate2"] == {TORCH: 0.25}
    assert body["served"][0][TORCH]["audio_s_per_wall_s"] == 10.0
    assert {e: a["audio_s_per_wall_s"] for e, a in body["alone"].items()} == {
        CT2: 40.0,
        TORCH: 12.0,
    }
