"""``asrserve bench SCENARIO [VALUE]``: each scenario sets what its old flag set, the old
flags still work with a note, and a scenario named twice or without its value is refused."""

from __future__ import annotations

import argparse

import pytest

from asrserve.bench.arguments import add_arguments, scenario_flags


def parsed(*argv: str) -> argparse.Namespace:
    bench = argparse.ArgumentParser()
    add_arguments(bench)
    return scenario_flags(bench.parse_args(argv))


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["live", "2,4", "--policies", "greedy"], "live", (2, 4)),
        (["batch-api", "6"], "batch", 6),
        (["stream", "60"], "stream", 60.0),
        (["models", "tiny.en,base"], "models", "tiny.en,base"),
        (["curve"], "rate", "auto"),
        (["ceiling"], "ceiling", True),
        (["distributed"], "distributed", True),
        (["memory"], "memory", True),
        (["soak", "20"], "soak", 20.0),
        (["hostile", "30"], "hostile", 30.0),
        (["fallback"], "fallback", 3),
        (["fallback", "1"], "fallback", 1),
        (["keywords"], "keyword_repeats", 3),
        (["keywords", "1"], "keyword_repeats", 1),
    ],
)
def test_a_scenario_sets_what_its_flag_did(argv: list[str], dest: str, value: object) -> None:
    assert getattr(parsed(*argv), dest) == value


def test_load_is_the_default_and_the_old_flags_still_work(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parsed().scenario == "load" and parsed().live is None
    assert parsed("--live", "2").live == (2,)
    assert "--live is deprecated, use 'asrserve bench live ...'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["live", "2", "--stream", "5"], "live and --stream name two scenarios"),
        (["live"], "live needs N,M"),
        (["memory", "3"], "memory takes no value"),
        (["batch-api", "0"], "must be at least 1"),
        (["load", "7"], "unexpected '7'"),
    ],
)
def test_a_scenario_is_named_once_with_its_value(argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        parsed(*argv)
