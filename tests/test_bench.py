"""``asrserve bench`` end to end on a few clips: both loop kinds, report and JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asrserve.corpus import Clip

pytestmark = pytest.mark.slow


def test_bench_runs_policies_side_by_side(corpus: list[Clip], tmp_path: Path) -> None:
    audio = tmp_path / "audio"
    audio.mkdir()
    clips = [clip for clip in corpus if clip.duration <= 12][:3]
    for clip in clips:
        shutil.copy(clip.path, audio / clip.path.name)
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({clip.path.name: clip.text for clip in clips}))
    report = tmp_path / "report.json"
    common = [
        sys.executable,
        "-m",
        "asrserve.cli",
        "bench",
        "--audio",
        str(audio),
        "--refs",
        str(refs),
        "--beam-size",
        "1",
        "--json",
        str(report),
    ]
    closed = subprocess.run(
        [
            *common,
            "--policies",
            "greedy,none",
            "--concurrency",
            "3,1",
            "--requests",
            "3",
            "--offline",
        ],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert closed.returncode == 0, closed.stderr
    assert "| greedy | closed loop, 3 client(s) | 3 | 0 |" in closed.stdout
    assert "offline limit" in closed.stdout
    body = json.loads(report.read_text())
    assert [(r["policy"], r["requests"], r["errors"]) for r in body["runs"]] == [
        ("greedy", 3, 0),
        ("greedy", 3, 0),
        ("none", 3, 0),
        ("none", 3, 0),
    ]
    assert all(r["wer"] is not None and r["wer"] <= 0.3 for r in body["runs"])
    assert body["offline"]["audio_s_per_wall_s"] > 0

    open_loop = subprocess.run(
        [*common, "--policies", "window", "--rate", "4", "--burst", "2", "--requests", "4"],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert open_loop.returncode == 0, open_loop.stderr
    assert "open loop, 4 req/s (bursts of 2)" in open_loop.stdout
    assert json.loads(report.read_text())["runs"][0]["requests"] == 4
