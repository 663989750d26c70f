"""``asrserve bench keywords`` without a model: its flags, the order the sides run in, the
texts it scores, the windows it counts and its report."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import pytest

from asrserve.bench.arguments import check_engines, scenario_flags
from asrserve.bench.ceiling_layout import Decoded
from asrserve.bench.keywords import (
    DEFAULT_KEYWORDS,
    WITH,
    WITHOUT,
    changed_windows,
    file_text,
    kept_windows,
    keywords_report,
    side_order,
    window_texts,
)
from asrserve.cli.main import parser
from asrserve.engine.base import ChunkInput, RawSegment


def bench_args(*argv: str) -> argparse.Namespace:
    return scenario_flags(parser().parse_args(["bench", *argv]))


def chunk(offset: float) -> ChunkInput:
    return ChunkInput(features=np.zeros((80, 500), np.float32), offset=offset, duration=5.0)


def segment(text: str) -> RawSegment:
    return RawSegment(0, 0.0, 1.0, text, [], -0.1, 1.0, 0.0, 0.0, None)


def test_the_scenario_takes_its_repeats_and_the_default_terms() -> None:
    args = bench_args("keywords", "2")
    assert (args.keyword_repeats, args.keywords) == (2, DEFAULT_KEYWORDS)
    assert bench_args("keywords").keyword_repeats == 3


def test_keywords_are_read_as_stripped_terms() -> None:
    assert bench_args("keywords", "--keywords", " Grafana, Zyqlo ,,").keywords == (
        "Grafana",
        "Zyqlo",
    )


def test_no_keywords_at_all_are_refused() -> None:
    with pytest.raises(SystemExit):
        bench_args("keywords", "--keywords", " , ")


def test_keywords_measure_one_engine() -> None:
    check_engines(bench_args("keywords", "--engines", "transformers"))
    with pytest.raises(SystemExit, match="one engine"):
        check_engines(bench_args("keywords", "--engines", "ctranslate2,transformers"))


def test_each_repetition_runs_the_sides_in_the_other_order() -> None:
    assert [side_order(r) for r in range(3)] == [
        (WITHOUT, WITH),
        (WITH, WITHOUT),
        (WITHOUT, WITH),
    ]


def test_a_files_text_is_its_windows_in_order_whatever_order_they_finished_in() -> None:
    first, second, third = chunk(0.0), chunk(5.0), chunk(10.0)
    decoded: Decoded = [
        ([third, first], [[segment(" the end.")], [segment(" It is "), segment(" a day.")]]),
        ([second], [[segment("  ")]]),  # a window that said nothing
    ]
    texts = window_texts(decoded)
    assert texts[id(first)] == "It is a day."
    assert file_text([first, second, third], texts) == "It is a day. the end."


def test_a_window_counts_as_kept_only_where_it_spells_a_term_the_other_does_not() -> None:
    terms = ("Grafana", "Zyqlo")
    without = {1: "open grafana now", 2: "open the door", 3: "a day", 4: "a day"}
    with_them = {1: "Open Grafana now.", 2: "Open Grafana's door.", 3: "a Zyqlos day", 4: "A day"}
    # 1 spells Grafana both ways; 3's "Zyqlos" is not the term; 2 alone adds one
    assert kept_windows(with_them, without, terms) == 1
    assert changed_windows(with_them, without) == 4


def test_the_report_puts_the_sides_and_their_ratio_side_by_side() -> None:
    figures: dict[str, Any] = {"median_wall_s": 2.0, "min_wall_s": 1.9, "max_wall_s": 2.2}
    body = {
        "engine": "ctranslate2",
        "compute_type": "int8",
        "keywords": ["Grafana", "Zyqlo"],
        "beam_size": 5,
        "windows": 4,
        "audio_s": 40.0,
        "batch_size": 16,
        "replicas": 2,
        "repeats": 3,
        "kept_windows": 1,
        "changed_windows": 1,
        "sides": {
            WITHOUT: {**figures, "audio_s_per_s": 20.0, "wer": 0.05},
            WITH: {**figures, "median_wall_s": 3.0, "audio_s_per_s": 13.3, "wer": None},
        },
        "with_over_without": 1.5,
    }
    lines = keywords_report(body).splitlines()
    assert "keywords (2: Grafana, Zyqlo), ctranslate2 (int8), beam 5, 4 windows" in lines[0]
    assert lines[1] == (
        "windows that kept the decode with keywords: 1 of 4; windows whose text changed: 1"
    )
    assert lines[4:] == [
        "| without keywords | 2.0 (1.9–2.2) | 20.0 | 0.0500 |",
        "| with keywords | 3.0 (1.9–2.2) | 13.3 | – |",
        "wall time with keywords / without them: 1.50",
    ]
