"""``scripts/gpu_check.sh dry-run``: the GPU check's whole path on the CPU with tiny sizes
(tiny.en packed as int8 into 24 MiB calls, every stage taken in, every step run), so that
the script cannot rot before it meets a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asrserve.engine.ct2_file import read_raw
from tests.support.servers import ROOT

pytestmark = pytest.mark.slow

LIMIT = 24 * 2**20  # the dry run's calls (scripts/gpu_check.sh)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gpu-check")
    env = {**os.environ, "HERE_PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "dry-run", str(folder)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return folder


@pytest.fixture(scope="module")
def report(dry_run: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((dry_run / "out" / "gpu-check.json").read_text())
    return body


def step(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in report["steps"] if s["name"] == name)
    return found


def test_every_step_ran(report: dict[str, Any]) -> None:
    assert {s["name"]: s["status"] for s in report["steps"]} == {
        "machine": "ok",
        "tiny.en/transformers": "ok",
        "tiny.en/service": "ok",
        "tiny.en/service-unbatched": "ok",
        "tiny.en/ctranslate2": "ok",
    }


def test_every_call_carries_at_most_its_limit_and_the_model_spans_several(
    report: dict[str, Any],
) -> None:
    stages = report["pack"]["stages"]
    assert report["pack"]["call_limit_bytes"] == LIMIT
    assert len(stages) >= 2 and all(s["with_tree_bytes"] <= LIMIT for s in stages)


def test_each_engine_has_a_row_per_batch_size(report: dict[str, Any]) -> None:
    for engine in ("transformers", "ctranslate2"):
        rows = step(report, f"tiny.en/{engine}")["result"]["dtypes"]["float32"]["rows"]
        assert [row["batch_size"] for row in rows] == [1, 2], engine


def test_the_service_answered_every_client_under_both_policies(report: dict[str, Any]) -> None:
    """The default and ``unbatched``, each under the clients and then one client (each
    English recording once)."""
    rows = {}
    for name in ("tiny.en/service", "tiny.en/service-unbatched"):
        result = step(report, name)["result"]
        rows[result["policy"]] = [
            (result[row]["requests"], result[row]["errors"]) for row in ("load", "lone")
        ]
    assert rows == {"greedy": [(2, 0), (3, 0)], "unbatched": [(2, 0), (3, 0)]}


def test_the_recordings_come_back_nearly_word_for_word(report: dict[str, Any]) -> None:
    served = step(report, "tiny.en/service")["result"]["wer_by_language"]
    alone = step(report, "tiny.en/transformers")["result"]["dtypes"]["float32"]["rows"]
    assert list(served) == ["en"] and served["en"]["clips"] == 3
    assert max(served["en"]["wer"], *(row["wer"] for row in alone)) < 0.25


def test_the_model_arrived_as_int8_and_ran_converted(dry_run: Path) -> None:
    _, _, variables = read_raw(dry_run / "home" / "payload" / "models" / "tiny.en" / "model.bin")
    assert variables["decoder/embeddings/weight"].dtype == np.int8
    assert (dry_run / "home" / "cache" / "transformers" / "tiny.en" / "model.safetensors").is_file()
