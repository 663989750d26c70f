"""``asrserve bench --policies none@2x1``: a policy on a given CPU layout."""

from __future__ import annotations

import pytest

from asrserve.bench.runner import policy_env
from asrserve.cli.main import parser


def test_a_plain_policy_leaves_the_layout_to_the_server() -> None:
    assert policy_env("greedy") == {"ASRSERVE_BATCH_POLICY": "greedy"}


def test_a_layout_sets_replicas_and_threads() -> None:
    assert policy_env("none@2x1") == {
        "ASRSERVE_BATCH_POLICY": "none",
        "ASRSERVE_CPU_REPLICAS": "2",
        "ASRSERVE_CPU_THREADS": "1",
    }


def test_a_malformed_layout_is_refused_with_its_form() -> None:
    with pytest.raises(SystemExit, match="REPLICASxTHREADS"):
        policy_env("none@two")


def test_the_bench_help_renders(capsys: pytest.CaptureFixture[str]) -> None:
    """Every option's help text formats (a bare % in one breaks ``--help``)."""
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(["bench", "--help"])
    assert exit_.value.code == 0
    assert "--ceiling" in capsys.readouterr().out
