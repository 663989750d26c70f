"""``asrserve bench`` end to end on a few clips: both loop kinds, report and JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from asrserve.bench.ceiling import layouts
from asrserve.bench.corpus import Clip
from asrserve.engine.layout import usable_cores

pytestmark = pytest.mark.slow

# ``stream``: just over one 30 s window, so the joined file is cut into windows (32.2 s of
# the three clips and their gaps)
STREAM_S = 31


def bench_clips(corpus: list[Clip]) -> list[Clip]:
    return [clip for clip in corpus if clip.duration <= 12][:3]


def run_bench(command: list[str]) -> subprocess.CompletedProcess[str]:
    """``command`` run to the end; it must succeed."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=280, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def bench_command(corpus: list[Clip], tmp_path: Path) -> tuple[list[str], Path]:
    """``asrserve bench`` over three short clips (beam 1) and the path of its JSON report."""
    audio = tmp_path / "audio"
    audio.mkdir()
    clips = bench_clips(corpus)
    for clip in clips:
        shutil.copy(clip.path, audio / clip.path.name)
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({clip.path.name: clip.text for clip in clips}))
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "asrserve.cli", "bench", "--audio", str(audio)]
    return [*command, "--refs", str(refs), "--beam-size", "1", "--json", str(report)], report


def test_bench_runs_policies_side_by_side(corpus: list[Clip], tmp_path: Path) -> None:
    common, report = bench_command(corpus, tmp_path)
    closed = run_bench(
        [
            *common,
            "--policies",
            "greedy,none",
            "--concurrency",
            "3,1",
            "--requests",
            "3",
            "--ceiling",
            "--ceiling-batch-sizes",
            "1,4",
            "--ceiling-windows",
            "bucketed",
            "--ceiling-passes",
            "1",
            "--ceiling-repetitions",
            "2",
        ]
    )
    assert "| greedy | closed loop, 3 client(s) | 3 | 0 |" in closed.stdout
    assert "× the ceiling" in closed.stdout
    body = json.loads(report.read_text())
    assert [(r["policy"], r["requests"], r["errors"]) for r in body["runs"]] == [
        ("greedy", 3, 0),
        ("greedy", 3, 0),
        ("none", 3, 0),
        ("none", 3, 0),
    ]
    assert all(r["wer"] <= 0.3 for r in body["runs"])
    ceiling = body["ceiling"]
    assert ceiling["audio_s"] == pytest.approx(
        sum(c.duration for c in bench_clips(corpus)), abs=0.1
    )
    rows = ceiling["rows"]
    assert ceiling["audio_s_per_wall_s"] == max(r["audio_s_per_wall_s"] for r in rows)
    assert [(r["replicas"], r["threads"], r["windows"], r["batch_size"]) for r in rows] == [
        (*layout, "bucketed", size) for layout in layouts(usable_cores()) for size in (1, 4)
    ]
    assert all(
        r["audio_s_per_wall_s_min"] <= r["audio_s_per_wall_s"] <= r["audio_s_per_wall_s_max"]
        for r in rows
    )

    open_loop = run_bench(
        [*common, "--policies", "window", "--rate", "4", "--burst", "2", "--requests", "4"]
    )
    assert "open loop, 4 req/s (bursts of 2)" in open_loop.stdout
    assert json.loads(report.read_text())["runs"][0]["requests"] == 4


def test_bench_batch_scenario(corpus: list[Clip], tmp_path: Path) -> None:
    common, report = bench_command(corpus, tmp_path)
    batch_flags = ["--policies", "greedy", "--concurrency", "0", "batch-api", "6"]
    batch_flags += [
        "--ceiling-batch-sizes",
        "4",
        "--ceiling-passes",
        "1",
        "--ceiling-repetitions",
        "1",
    ]
    done = run_bench([*common, *batch_flags, "--batch-probes", "3"])
    assert "batch alone × ceiling" in done.stdout
    assert "under-batch p95 / idle p95" in done.stdout
    body = json.loads(report.read_text())
    assert body["runs"] == []  # --concurrency 0: no load patterns, no per-policy servers
    ceiling = body["ceiling"]["audio_s_per_wall_s"]
    batch = body["batch"]
    assert batch["ceiling_audio_s_per_wall_s"] == ceiling
    alone = batch["batch_alone"]
    assert (alone["status"], alone["requests"], alone["completed"], alone["failed"]) == (
        "completed",
        6,
        6,
        0,
    )
    # the six items cycle through the three clips
    assert alone["audio_s"] == pytest.approx(
        2 * sum(c.duration for c in bench_clips(corpus)), abs=0.2
    )
    assert alone["audio_s_per_wall_s"] == pytest.approx(
        alone["audio_s"] / alone["wall_s"], rel=0.01
    )
    assert alone["x_ceiling"] == pytest.approx(alone["audio_s_per_wall_s"] / ceiling, rel=0.01)
    assert alone["wer"] <= 0.3
    for loop in (batch["interactive_idle"], batch["interactive_under_batch"]):
        assert (loop["requests"], loop["errors"], len(loop["latencies_s"])) == (3, 0, 3)
        assert 0 < loop["p50_s"] <= loop["p95_s"] <= loop["p99_s"]
    loaded = batch["interactive_under_batch"]
    assert loaded["batch_total"] == 6
    # cancelled when still running at the loop's end (a valid measurement), else completed
    final = "cancelled" if loaded["batch_status_at_end"] == "in_progress" else "completed"
    assert loaded["batch_final_status"] == final
    assert loaded["valid"] == (loaded["batch_status_at_end"] == "in_progress")
    assert loaded["batch_audio_s_during_loop"] > -0.01  # rounding
    idle = batch["interactive_idle"]
    assert batch["p95_under_batch_over_idle"] == pytest.approx(
        loaded["p95_s"] / idle["p95_s"], rel=0.01
    )


def test_bench_soak_short(corpus: list[Clip], tmp_path: Path) -> None:
    """``soak 20``: capacity, then 20 s of open-loop load at 0.8 × it; no errors, a
    window-by-window report and the server's memory over the run."""
    common, report = bench_command(corpus, tmp_path)
    done = run_bench([*common, "soak", "20", "--soak-load", "0.8"])
    assert "soak PASSED" in done.stdout and "| from s | req | err |" in done.stdout
    soak = json.loads(report.read_text())["soak"]
    offered = round(0.8 * soak["capacity"]["audio_s_per_s"], 3)  # --soak-load 0.8
    assert soak["offered"]["audio_s_per_s"] == pytest.approx(offered, abs=0.002)
    # how many arrive is Poisson at 0.8 × the measured capacity: the machine's speed decides
    assert soak["requests"] == sum(row["requests"] for row in soak["windows"]) > 0
    assert soak["errors"] == 0 and soak["error_samples"] == []
    assert [row["start_s"] for row in soak["windows"]] == [0, 10]
    for row in soak["windows"]:
        assert row["errors"] == 0 and 0 < row["p50_s"] <= row["p95_s"] <= row["p99_s"]
        assert row["rss_max_mib"] > 100
    rss = soak["rss"]
    assert rss["ok"] and rss["growth_mib"] <= rss["bound_mib"] and rss["max_mib"] >= rss["last_mib"]
    assert rss["baseline_from_s"] == 0
    times, mib = np.asarray(soak["rss_samples"], dtype=float).T  # the slope of the samples
    slope = float(np.polyfit(times, mib, 1)[0]) * 3600
    assert rss["trend_mib_per_h"] == pytest.approx(slope, abs=36)  # samples rounded to 0.1 MiB
    assert len(soak["rss_samples"]) >= 10  # every 2 s over 20 s


def test_bench_stream_scenario(corpus: list[Clip], tmp_path: Path) -> None:
    """``stream 31``: the clips joined into just over one 30 s window of audio (so it is
    cut into windows, the first closing at 15 s of speech), answered streamed and plain by
    the server as configured and by one that decodes the whole file first (the baseline);
    the deltas join to the text, which is the plain answer's."""
    common, report = bench_command(corpus, tmp_path)
    done = run_bench([*common, "stream", str(STREAM_S), "--requests", "1"])
    body = json.loads(report.read_text())["stream"]
    # whole clips: it stops once past STREAM_S
    assert STREAM_S <= body["audio_s"] < STREAM_S + 31
    [run] = body["runs"]
    assert run["joined_equals_text"] and run["same_text"] and run["deltas"] >= 2, run
    assert 0 < run["first_delta_s"] <= run["done_s"]
    assert body["first_delta_share"] == round(run["first_delta_s"] / run["done_s"], 3)
    [baseline] = body["baseline"]["runs"]  # the whole file decoded first, side by side
    assert baseline["joined_equals_text"] and baseline["same_text"], baseline
    assert "first delta" in done.stdout and "whole file first" in done.stdout


def test_bench_live_scenario(corpus: list[Clip], tmp_path: Path) -> None:
    """``--live 2``: two sessions at once replaying the clips at real-time pace for 8 s:
    their turns complete, and the report gives the delays, batches and WER, the word lag,
    and the deltas joined against the completed turns (equal: no delta is taken back)."""
    common, report = bench_command(corpus, tmp_path)
    done = run_bench([*common, "live", "2", "--live-seconds", "8", "--policies", "greedy"])
    live = json.loads(report.read_text())["live"]
    [row] = live["policies"]["greedy"]["rows"]
    assert row["sessions"] == 2 and row["errors"] == 0 and row["unfinished"] == 0, row
    assert row["turns"] >= 2 and 0 < row["turn_p50_s"] <= row["turn_p95_s"]
    assert row["wer"] <= 0.5 and 0 < row["busy_fraction"] < 1
    assert row["delta_wer"] == 0.0, row
    assert row["words_timed"] > 0 and 0 < row["word_lag_p50_s"] <= row["word_lag_p95_s"], row
    largest = live["policies"]["greedy"]["largest_n"]
    assert largest == (2 if row["turn_p95_s"] <= 1.5 else 0)
    assert "largest N within the target" in done.stdout


def test_bench_distributed_scenario(corpus: list[Clip], tmp_path: Path) -> None:
    """``distributed``: embedded, then 1 worker node × 2 threads and 2 × 1 behind an API
    node on a throwaway Redis, and the hop probe; every request answered, report complete."""
    common, report = bench_command(corpus, tmp_path)
    flags = ["distributed", "--concurrency", "2", "--requests", "4", "--hop-probes", "3"]
    done = run_bench([*common, *flags])
    assert "added by the hop: p50" in done.stdout
    body = json.loads(report.read_text())
    assert [(r["policy"], r["requests"], r["errors"]) for r in body["runs"]] == [
        ("embedded 1×2", 4, 0),
        ("distributed 1×2", 4, 0),
        ("distributed 2×1", 4, 0),
    ]
    assert all(r["wer"] <= 0.3 for r in body["runs"])
    speed = {r["policy"]: r["audio_s_per_wall_s"] for r in body["runs"]}
    dist = body["distributed"]
    assert [(s["worker_processes"], s["threads_per_process"]) for s in dist["shapes"]] == [
        (0, 2),
        (1, 2),
        (2, 1),
    ]
    ratios = dist["ratios"]["closed loop, 2 client(s)"]
    assert ratios == {
        "2x1_over_1x2": pytest.approx(
            speed["distributed 2×1"] / speed["distributed 1×2"], rel=0.01
        ),
        "distributed_1x2_over_embedded": pytest.approx(
            speed["distributed 1×2"] / speed["embedded 1×2"], rel=0.01
        ),
    }
    hop = dist["hop"]
    assert hop["probes"] == 3
    for side in (hop["embedded"], hop["distributed_1x2"]):
        assert (side["requests"], side["errors"]) == (3, 0)
        assert 0 < side["min_s"] <= side["p50_s"] <= side["p95_s"]
    added = hop["distributed_1x2"]["p50_s"] - hop["embedded"]["p50_s"]
    assert hop["added_p50_s"] == pytest.approx(added, abs=0.001)


def test_bench_fallback_scenario(corpus: list[Clip], tmp_path: Path) -> None:
    """``--fallback``: both sides over the same windows, and what the fallback did."""
    common, report = bench_command(corpus, tmp_path)
    done = run_bench([*common, "fallback", "1", "--max-batch-size", "4"])
    assert "throughput with the fallback / without it:" in done.stdout
    body = json.loads(report.read_text())["fallback"]
    assert set(body["sides"]) == {"fallback", "no fallback"}
    assert body["audio_s"] <= sum(c.duration for c in bench_clips(corpus))
    # every window is decoded at 0 (a short one that fails twice there: its own window,
    # then the full one); only a window decoded again has decodes above 0
    decodes = body["decodes_by_temperature"]
    assert decodes["0.0"] >= body["windows"] > 0
    assert sum(n for t, n in decodes.items() if t != "0.0") <= 5 * body["retried_windows"]


def test_bench_keywords_scenario(corpus: list[Clip], tmp_path: Path) -> None:
    """``keywords``: both sides over the same windows; terms the clips never say leave every
    window's text as it is without them."""
    common, report = bench_command(corpus, tmp_path)
    done = run_bench([*common, "keywords", "1", "--max-batch-size", "4"])
    assert "wall time with keywords / without them:" in done.stdout
    body = json.loads(report.read_text())["keywords"]
    assert body["audio_s"] <= sum(c.duration for c in bench_clips(corpus))
    assert body["windows"] > 0
    sides = body["sides"]
    assert set(sides) == {"without keywords", "with keywords"}
    walls = [sides[side]["median_wall_s"] for side in ("with keywords", "without keywords")]
    assert body["with_over_without"] == pytest.approx(walls[0] / walls[1], rel=0.01)
    assert (body["kept_windows"], body["changed_windows"]) == (0, 0)
    assert sides["with keywords"]["wer"] == sides["without keywords"]["wer"] <= 0.3


def test_bench_runs_engines_side_by_side(
    corpus: list[Clip], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--engines ctranslate2,transformers``: each served row once per engine, each engine
    alone on the same windows, and ratios that are the rows' own."""
    common, report = bench_command(corpus, tmp_path)
    monkeypatch.setenv("ASRSERVE_DEVICE", "cpu")
    monkeypatch.setenv("ASRSERVE_MODEL_CACHE_DIR", str(tmp_path / "models"))  # the conversion
    flags = ["--engines", "ctranslate2,transformers", "--policies", "greedy"]
    flags += ["--concurrency", "2", "--requests", "3", "--ceiling", "--ceiling-layouts", "1x1"]
    flags += ["--ceiling-batch-sizes", "1,2", "--ceiling-windows", "bucketed"]
    flags += ["--ceiling-passes", "1", "--ceiling-repetitions", "2"]
    done = run_bench([*common, *flags])
    assert "| greedy (transformers) | closed loop, 2 client(s) | 3 | 0 |" in done.stdout
    body = json.loads(report.read_text())
    assert [(r["policy"], r["engine"], r["errors"]) for r in body["runs"]] == [
        ("greedy", "ctranslate2", 0),
        ("greedy", "transformers", 0),
    ]
    assert all(r["wer"] <= 0.3 for r in body["runs"])
    engines = body["engines"]
    assert engines["compute_types"] == {"ctranslate2": "int8", "transformers": "float32"}
    speed = {r["engine"]: r["audio_s_per_wall_s"] for r in body["runs"]}
    [served] = engines["served"]
    assert served["over_ctranslate2"]["transformers"] == pytest.approx(
        speed["transformers"] / speed["ctranslate2"], rel=0.01
    )
    assert [(p["layout"], p["batch_size"]) for p in engines["curve"]] == [("1×1", 1), ("1×1", 2)]
    for point in engines["curve"]:
        ct2, torch = point["ctranslate2"], point["transformers"]
        assert all(one["min"] <= one["audio_s_per_wall_s"] <= one["max"] for one in (ct2, torch))
        assert point["over_ctranslate2"]["transformers"] == pytest.approx(
            torch["audio_s_per_wall_s"] / ct2["audio_s_per_wall_s"], rel=0.01
        )
    assert body["ceiling"] is None  # each engine has its own: engines.alone
    assert set(engines["alone"]) == {"ctranslate2", "transformers"}


def test_bench_wyoming_scenario(tmp_path: Path) -> None:
    """``wyoming 1`` on asrserve alone, two spoken commands in one round: each answered
    over the Wyoming protocol, heard as said (tiny.en), timed, in the table and the JSON
    with the settings of the server it ran on."""
    report = tmp_path / "report.json"
    flags = ["wyoming", "1", "--requests", "2", "--rounds", "1", "--json", str(report)]
    done = run_bench([sys.executable, "-m", "asrserve.cli", "bench", *flags])
    body = json.loads(report.read_text())["wyoming"]
    [row] = body["rows"]
    assert (row["server"], row["satellites"], row["utterances"], row["errors"]) == (
        "asrserve",
        1,
        2,
        0,
    )
    assert row["wer"] <= 0.2 and 0 < row["p50_s"] <= row["p95_s"] <= row["max_s"], row
    assert body["servers"]["asrserve"]["settings"]["ASRSERVE_BEAM_SIZE"] == "5"
    assert body["servers"]["asrserve"]["models"] == ["tiny.en"]
    assert "| asrserve | 1 | 2 | 0 |" in done.stdout
