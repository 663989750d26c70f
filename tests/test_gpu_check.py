"""``scripts/gpu_check.sh dry-run``: the GPU check's whole path on the CPU with tiny sizes
(tiny.en packed as int8 into 48 MiB calls, every stage taken in, every step run and
judged), so that the script cannot rot before it meets a GPU; the same run with its decode
broken on purpose, which must fail naming the judgements; and the judgements themselves on
results made up here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asrserve.bench.gpu.check import failed_steps, judged
from asrserve.bench.gpu.engine_curve import batches
from asrserve.bench.gpu.judge import NO_SPEECH_BOUND, judge_curve, judge_service
from asrserve.engine.ct2_file import read_raw
from asrserve.engine.fallback import NO_SPEECH_THRESHOLD
from tests.support.servers import ROOT

slow = pytest.mark.slow

LIMIT = 48 * 2**20  # the dry run's calls (scripts/gpu_check.sh)


def check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/gpu_check.sh", *args],
        cwd=ROOT,
        env={**os.environ, "HERE_PYTHON": sys.executable, "PYTHON": sys.executable, **(env or {})},
        capture_output=True,
        text=True,
        timeout=280,
    )


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gpu-check")
    done = check("dry-run", str(folder))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return folder


@pytest.fixture(scope="module")
def report(dry_run: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((dry_run / "out" / "gpu-check.json").read_text())
    return body


def step(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in report["steps"] if s["name"] == name)
    return found


@slow
def test_every_step_ran(report: dict[str, Any]) -> None:
    assert {s["name"]: s["status"] for s in report["steps"]} == {
        "machine": "ok",
        "tiny.en/transformers": "ok",
        "tiny.en/service": "ok",
        "tiny.en/service-unbatched": "ok",
        "tiny.en/ctranslate2": "ok",
    }


@slow
def test_every_step_was_judged_and_every_judgement_passed(report: dict[str, Any]) -> None:
    judged_by_step = {
        s["name"]: [(j["name"], j["passed"]) for j in s["judgements"]] for s in report["steps"]
    }
    served = [
        "load/errors",
        "load/wer",
        "lone/errors",
        "lone/wer",
        "language/en/errors",
        "lone/differs-from-engine",
        "silence/errors",
        "silence/text",
    ]
    curve = ["float32-reference/wer"]
    curve += [f"float32/b{size}/{what}" for size in (1, 2) for what in ("wer", "wer-vs-float32")]
    curve += ["float32/known-clip/text", "float32/known-clip/wer", "float32/silence/no-speech"]
    passed = {
        "machine": [("imports/not-importable", True)],
        "tiny.en/transformers": [(name, True) for name in curve],
        "tiny.en/service": [(name, True) for name in served],
        "tiny.en/service-unbatched": [(name, True) for name in served],
        "tiny.en/ctranslate2": [(name, True) for name in curve],
    }
    assert judged_by_step == passed
    assert report["failures"] == []


@slow
def test_the_versions_are_recorded_and_what_needs_a_gpu_is_none(report: dict[str, Any]) -> None:
    assert report["versions"] == {
        "driver": None,
        "driver_cuda": None,
        "gpu": None,
        "compute_capability": None,
        "torch": metadata.version("torch"),
        "cuda_runtime_torch": None,
        "ctranslate2": metadata.version("ctranslate2"),
        "cublas_ctranslate2": None,
    }


@slow
def test_every_call_carries_at_most_its_limit_and_the_model_spans_several(
    report: dict[str, Any],
) -> None:
    stages = report["pack"]["stages"]
    assert report["pack"]["call_limit_bytes"] == LIMIT
    assert len(stages) >= 2 and all(s["with_tree_bytes"] <= LIMIT for s in stages)


@slow
def test_each_engine_has_a_row_per_batch_size_over_every_window(report: dict[str, Any]) -> None:
    """Three prompts: a row of 1 is three batches, a row of 2 is two (the last one holding
    the first prompt again); the known clip is the first prompt."""
    for engine in ("transformers", "ctranslate2"):
        result = step(report, f"tiny.en/{engine}")["result"]
        rows = result["dtypes"]["float32"]["rows"]
        assert [(row["batch_size"], row["batches"]) for row in rows] == [(1, 3), (2, 2)], engine
        assert result["reference"]["from"] == "the float32 row at batch size 1"
        assert len(result["windows"]) == 3
        known = result["dtypes"]["float32"]["known"]
        assert known["clip"] == result["windows"][0]["clip"]


@slow
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


@slow
def test_the_service_answers_as_the_engine_does_and_silence_with_nothing(
    report: dict[str, Any],
) -> None:
    result = step(report, "tiny.en/service")["result"]
    clips = result["engine_answers"]["clips"]
    assert len(clips) == 3 and all(c["service"] and c["service"] == c["engine"] for c in clips)
    assert (result["silence"]["status"], result["silence"]["text"]) == (200, "")


@slow
def test_the_model_arrived_as_int8_and_ran_converted(dry_run: Path) -> None:
    _, _, variables = read_raw(dry_run / "home" / "payload" / "models" / "tiny.en" / "model.bin")
    assert variables["decoder/embeddings/weight"].dtype == np.int8
    assert (dry_run / "home" / "cache" / "transformers" / "tiny.en" / "model.safetensors").is_file()


@slow
def test_a_broken_decode_fails_the_check_naming_the_judgements(
    dry_run: Path, tmp_path: Path
) -> None:
    """The engine curve alone, its words reversed (``--break-decode``): the text is there
    but wrong, so the WER bounds and the known clip fail, and ``run`` exits 1 after writing
    the JSON. The float32 reference is that same row, so it is as wrong as the row and their
    difference is nothing; silence still says nothing."""
    env = {"ASRSERVE_GPU_HOME": str(dry_run / "home"), "OUT": str(tmp_path)}
    done = check(
        "run",
        *("--device", "cpu", "--dtypes", "float32", "--batch-sizes", "1", "--beam-size", "1"),
        *("--only", "tiny.en/transformers", "--break-decode"),
        env=env,
    )
    body = json.loads((tmp_path / "gpu-check.json").read_text())
    [only] = body["steps"]
    failed = sorted(j["name"] for j in only["judgements"] if not j["passed"])
    expected = ["float32-reference/wer", "float32/b1/wer", "float32/known-clip/wer"]
    assert (done.returncode, only["status"], failed) == (1, "failed", expected)
    assert [(f["step"], len(f["why"])) for f in body["failures"]] == [("tiny.en/transformers", 3)]
    assert all(name in done.stderr for name in expected), done.stderr[-3000:]


def curve_result(row_wer: float, float32_wer: float, known: str, no_speech: list[float]) -> Any:
    return {
        "reference": {"wer": float32_wer},
        "dtypes": {
            "bfloat16": {
                "rows": [{"batch_size": 8, "wer": row_wer, "float32_wer": float32_wer}],
                "known": {"text": known, "wer": 0.0 if known else 1.0},
                "silence": {"text": "You" if no_speech else "", "no_speech_prob": no_speech},
            }
        },
    }


def failing(judgements: list[Any]) -> list[tuple[str, Any]]:
    return [(j.name, j.value) for j in judgements if not j.passed]


def test_a_row_more_than_two_points_off_the_float32_reference_fails() -> None:
    assert failing(judge_curve(curve_result(0.07, 0.04, "right", [0.9]))) == [
        ("bfloat16/b8/wer-vs-float32", 0.03)
    ]
    assert failing(judge_curve(curve_result(0.06, 0.04, "right", [0.9]))) == []


def test_empty_transcripts_fail_the_bound_and_the_known_clip() -> None:
    """CTranslate2's empty transcripts on some drivers: every word deleted."""
    assert failing(judge_curve(curve_result(1.0, 0.04, "", []))) == [
        ("bfloat16/b8/wer", 1.0),
        ("bfloat16/b8/wer-vs-float32", 0.96),
        ("bfloat16/known-clip/text", ""),
        ("bfloat16/known-clip/wer", 1.0),
    ]


def test_silence_fails_where_the_engine_hears_speech_in_it() -> None:
    assert failing(judge_curve(curve_result(0.04, 0.04, "right", [0.95, 0.3]))) == [
        ("bfloat16/silence/no-speech", 0.3)
    ]


def test_the_engines_no_speech_threshold_is_the_bound() -> None:
    assert NO_SPEECH_BOUND == NO_SPEECH_THRESHOLD


def service_result(lone_text: str, silence_text: str) -> dict[str, Any]:
    row = {"errors": 0, "wer": 0.02}
    clip = {"clip": "en-1.wav", "service": lone_text, "engine": "Hello there."}
    return {
        "load": row,
        "lone": row,
        "wer_by_language": {"en": row},
        "engine_answers": {"clips": [clip | {"same": lone_text == clip["engine"]}]},
        "silence": {"errors": 0, "text": silence_text},
    }


def test_the_service_fails_where_it_answers_otherwise_than_the_engine_or_silence_speaks() -> None:
    assert failing(judge_service(service_result("Hello there.", ""))) == []
    assert failing(judge_service(service_result("Hello, bear.", "You"))) == [
        ("lone/differs-from-engine", ["en-1.wav"]),
        ("silence/text", "You"),
    ]


def test_a_judged_failure_fails_the_step_and_the_run_names_it() -> None:
    record: dict[str, Any] = {"name": "base/transformers", "kind": "curve", "status": "ok"}
    record["result"] = curve_result(1.0, 0.04, "right", [])
    unreached: dict[str, Any] = {"name": "base/ctranslate2", "kind": "curve", "status": "skipped"}
    unreached |= {"error": "9 s of the deadline left", "unreached": True}
    skipped: dict[str, Any] = {"name": "tiny.en/ctranslate2", "kind": "curve"}
    skipped |= {"status": "skipped", "result": {"skipped": "libcublas.so.12 does not load"}}
    records = [judged(record, "cuda"), judged(skipped, "cuda"), unreached]
    assert [r["status"] for r in records] == ["failed", "skipped", "skipped"]
    assert failed_steps(records) == [
        {
            "step": "base/transformers",
            "status": "failed",
            "why": [
                "bfloat16/b8/wer = 1.0, not <= 0.1",
                "bfloat16/b8/wer-vs-float32 = 0.96, not |delta| <= 0.02",
            ],
        },
        {"step": "base/ctranslate2", "status": "skipped", "why": ["9 s of the deadline left"]},
    ]


def test_every_row_holds_every_window_in_full_batches() -> None:
    assert batches(3, 1) == [[0], [1], [2]]
    assert batches(3, 2) == [[0, 1], [2, 0]]
    assert batches(3, 4) == [[0, 1, 2, 0]]
