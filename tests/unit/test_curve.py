"""``asrserve bench --rate auto``: the curve's rates, its sustained-rate rule, its table and
its SVG, from given numbers (no server)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

from asrserve.bench.curve import (
    Curve,
    Point,
    curve_report,
    make_point,
    point_rates,
    poisson_pattern,
    ratio,
)
from asrserve.bench.curve_svg import curve_svg, nice_ticks
from asrserve.bench.load import AudioFile, LoadResult, Sample, arrival_gaps

SVG = "{http://www.w3.org/2000/svg}"


def point(
    policy: str = "greedy",
    offered: float = 1.0,
    achieved: float | None = None,  # the offered rate
    p95: float = 2.0,
    errors: int = 0,
    percent: float = 50.0,
) -> Point:
    served = offered if achieved is None else achieved
    return Point(policy, percent, offered, offered * 10, 20, errors, served, served * 10,
                 1.0, p95, p95 + 1)  # fmt: skip


def test_point_rates_are_the_percentages_of_the_capacity() -> None:
    assert point_rates(2.0, [25, 50, 110]) == [0.5, 1.0, 2.2]


def test_the_poisson_pattern_offers_the_asked_rate_over_its_requests() -> None:
    gaps = arrival_gaps(poisson_pattern(1.5, 20))
    assert math.isclose(len(gaps) / sum(gaps), 1.5)


def test_a_point_within_budget_served_as_fast_as_offered_is_sustained() -> None:
    assert point(offered=1.0, achieved=0.95, p95=5.0).sustained


def test_a_point_over_the_p95_budget_does_not_count() -> None:
    curve = Curve("greedy", 2.0, 20.0, (point(offered=1.0), point(offered=1.5, p95=5.1)))
    assert curve.sustained_rps == 1.0


def test_a_point_served_slower_than_095_of_its_offer_does_not_count() -> None:
    curve = Curve("greedy", 2.0, 20.0, (point(offered=1.0), point(offered=1.5, achieved=1.4)))
    assert curve.sustained_rps == 1.0


def test_a_point_with_an_error_does_not_count() -> None:
    curve = Curve("greedy", 2.0, 20.0, (point(offered=1.0), point(offered=1.5, errors=1)))
    assert curve.sustained_rps == 1.0


def test_a_point_with_no_answer_is_not_sustained() -> None:
    assert not point(p95=math.nan).sustained


def test_a_curve_without_a_sustained_point_has_no_rate() -> None:
    assert Curve("none", 1.0, 10.0, (point(p95=9.0),)).sustained_rps is None


def test_the_ratio_is_greedy_sustained_rate_over_none() -> None:
    greedy = Curve("greedy", 4.0, 40.0, (point(offered=3.0),))
    none = Curve("none", 2.0, 20.0, (point("none", offered=2.0),))
    assert ratio([none, greedy]) == 1.5


def test_the_ratio_needs_both_policies() -> None:
    assert ratio([Curve("greedy", 4.0, 40.0, (point(offered=3.0),))]) is None


def test_a_point_is_made_from_a_load_result() -> None:
    clip = AudioFile(Path("a.wav"), 10.0, None, b"")
    result = LoadResult(wall=4.0, samples=[Sample(clip, 1.0, 200, "x"), Sample(clip, 3.0, 500, "")])
    made = make_point("none", 50.0, 0.5, result, [clip, clip])
    assert (made.offered_audio, made.errors, made.achieved_rps, made.achieved_audio) == (
        5.0,
        1,
        0.25,
        2.5,
    )


def test_the_report_is_a_table_then_capacity_and_sustained_rates() -> None:
    greedy = Curve("greedy", 4.0, 40.0, (point(offered=3.0, percent=75),))
    none = Curve("none", 2.0, 20.0, (point("none", offered=2.0, p95=6.0, percent=100),))
    assert curve_report([greedy, none]).splitlines() == [
        "| policy | % of capacity | offered req/s | offered audio s/s | achieved req/s "
        "| achieved audio s/s | p50 s | p95 s | p99 s | errors | sustained |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        "| greedy | 75 | 3.000 | 30.00 | 3.000 | 30.00 | 1.00 | 2.00 | 3.00 | 0 | yes |",
        "| none | 100 | 2.000 | 20.00 | 2.000 | 20.00 | 1.00 | 6.00 | 7.00 | 0 | no |",
        "",
        "capacity (closed loop, 16 clients):",
        "  greedy: 4.000 req/s, 40.00 audio s/s",
        "  none: 2.000 req/s, 20.00 audio s/s",
        "highest offered rate sustained (achieved ≥ 0.95 × offered, no errors, p95 ≤ 5 s):",
        "  greedy: 3.000 req/s",
        "  none: no point sustained",
    ]


def test_the_report_gives_the_ratio_when_both_policies_sustain_a_rate() -> None:
    greedy = Curve("greedy", 4.0, 40.0, (point(offered=3.0),))
    none = Curve("none", 2.0, 20.0, (point("none", offered=2.0),))
    assert curve_report([greedy, none]).splitlines()[-1] == (
        "greedy / none: 1.50× (issue target: ≥ 1.5×)"
    )


def test_the_svg_is_xml_with_one_polyline_per_policy_and_series() -> None:
    greedy = Curve("greedy", 4.0, 40.0, (point(offered=1.0), point(offered=3.0, p95=math.nan)))
    none = Curve("none", 2.0, 20.0, (point("none", offered=2.0),))
    root = ET.fromstring(curve_svg([greedy, none]))
    lines = [(p.get("data-policy"), p.get("data-series")) for p in root.iter(f"{SVG}polyline")]
    series = ["p50", "p95", "p99", "achieved"]
    assert sorted(lines) == sorted((policy, s) for policy in ("greedy", "none") for s in series)


def test_the_svg_leaves_out_a_point_without_a_latency() -> None:
    greedy = Curve("greedy", 4.0, 40.0, (point(offered=1.0), point(offered=3.0, p95=math.nan)))
    root = ET.fromstring(curve_svg([greedy]))
    p95 = next(p for p in root.iter(f"{SVG}polyline") if p.get("data-series") == "p95")
    assert len((p95.get("points") or "").split()) == 1


def test_ticks_step_evenly_from_zero_past_the_top() -> None:
    assert nice_ticks(7.3) == [0, 2, 4, 6, 8]
