"""Every measuring script in scripts/ run as a user runs it (``python scripts/X.py ARGS`` from
the repository's root), on the smallest workload its arguments take, and held to what it
prints or writes when it works: so that none can rot between the runs that fill the docs'
tables. (``gpu_check.sh`` is run by tests/test_gpu_check.py; ``test-images.sh`` and
``system-deps.sh`` by CI and ``make``.)

Left out, as minutes of base on two cores: accuracy_table.py's base rows (they share its
``row`` with the English row run here), engine_parity.py's languages table, and
restricted_detection.py's espeak sentences (the same pairs as the recorded prompts run here).
``image_checks.py`` needs the built images and podman, which CI's ``scripts/test-images.sh``
gives it: here it is run for its ``--help``, and its pure parts (the WAV it uploads, the log
records it counts) are run on inputs made here.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import wave
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from asrserve.bench.corpus import Clip, write_float_wav
from tests.support.servers import ROOT, Server

pytestmark = pytest.mark.slow

WER = r"\d\.\d{3,4}"  # a WER as the scripts print it


def run(script: str, *args: str) -> str:
    """``scripts/<script> ARGS`` run to the end; it must succeed. Its stdout."""
    done = subprocess.run(
        [sys.executable, f"scripts/{script}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def wers(line: str) -> list[float]:
    """The WERs of one printed row, each a plausible one for tiny.en or base."""
    found = [float(f) for f in re.findall(WER, line)]
    assert found and all(f <= 0.5 for f in found), line
    return found


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The server live_wer.py is pointed at, as its docstring starts it (PACE > 1 allowed)."""
    server = Server(
        tmp_path_factory.mktemp("live-wer") / "data", env={"ASRSERVE_LIVE_BURST_S": "1000"}
    )
    server.start()
    yield server
    server.stop()


def test_accuracy_table_english_row() -> None:
    """The English row alone (``0``: base not loaded), on the first English recording."""
    out = run("accuracy_table.py", "0", "1").splitlines()
    assert "| set | clips | asrserve | full windows | none | faster-whisper |" in out
    row = next(line for line in out if line.startswith("| en, tiny.en, transcription | 1 |"))
    assert len(wers(row)) == 4


def test_engine_parity_english_table() -> None:
    """The English table alone on one recording: every engine on both windows, and the
    transformers engine held to each CTranslate2 compute type."""
    out = run("engine_parity.py", "0", "1")
    assert "tiny.en, 1 English recordings" in out
    for engine in ("transformers", "ctranslate2 int8", "ctranslate2 float32"):
        for windows in ("adaptive", "full"):
            row = re.search(rf"  {engine} +{windows} +WER {WER}", out)
            assert row is not None, out
            wers(row[0])
        if engine != "transformers":
            assert re.search(rf"against {engine}: [01]/1 texts equal; word times over \d+", out)


def test_first_window_wer_one_file_per_set() -> None:
    out = run("first_window_wer.py", "--files", "1", "10", "5").splitlines()
    assert "| set | files | audio s | 5 s |" in out
    for label in ("real English", "bench corpus (espeak)"):
        row = next(line for line in out if line.startswith(f"| {label} | 1 |"))
        assert len(wers(row)) == 1


def test_gpu_pack_dry(tmp_path: Path) -> None:
    """tiny.en and one English prompt, no wheels (the dry run's way): one stage, one call."""
    out = run(
        "gpu_pack.py",
        "--out",
        str(tmp_path / "pack"),
        *("--models", "tiny.en", "--prompts", "1", "--no-long", "--no-wheels"),
    )
    assert re.search(r"gpu check: \d+ files, [\d.]+ MiB, in 1", out), out
    assert "call 1 of 1:" in out and "bash scripts/gpu_check.sh stage 1" in out
    manifest = json.loads((tmp_path / "pack" / "stage-1" / "manifest.json").read_text())
    assert manifest["files"] and not (tmp_path / "pack" / "stage-2").exists()


def image_checks() -> ModuleType:
    """scripts/image_checks.py as a module, for its pure parts."""
    spec = importlib.util.spec_from_file_location(
        "image_checks", ROOT / "scripts" / "image_checks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_image_checks_help_and_pure_parts(tmp_path: Path) -> None:
    assert "--image IMAGE" in run("image_checks.py", "--help")
    checks = image_checks()
    audio = checks.long_clip(tmp_path / "long.wav", 2)
    with wave.open(str(tmp_path / "long.wav")) as clip:
        assert (clip.getframerate(), clip.getnchannels()) == (16000, 1)
        assert 20 < clip.getnframes() / 16000 < 24  # jfk (11 s) twice
    assert audio == (tmp_path / "long.wav").read_bytes()
    log = "\n".join(
        [
            "not json",
            json.dumps({"msg": "job succeeded", "job_id": "a"}),
            json.dumps({"msg": "stopping: draining 1 jobs"}),
            json.dumps({"msg": "job succeeded", "job_id": "b"}),
            json.dumps({"msg": "worker node w1 stopped"}),
            json.dumps({"msg": "job succeeded", "job_id": "a"}),
        ]
    )
    assert checks.logged(log) == {"a": 2, "b": 1}
    assert checks.stored_while_draining(log) == 1


def test_live_wer_jfk(live_server: Server, corpus: list[Clip]) -> None:
    """jfk alone (no corpus clip) at 20× real time, live and as a file."""
    out = run("live_wer.py", live_server.url, "20", "0").splitlines()
    assert len(out) == 2, out
    assert out[0].startswith("jfk.flac: live ") and len(wers(out[0])) == 2
    assert out[1].startswith("all: live ") and len(wers(out[1])) == 2


def test_restricted_detection_recorded_prompts() -> None:
    """One recorded prompt per language (each in three pairs), no espeak sentences."""
    out = run("restricted_detection.py", "1", "0").splitlines()
    assert "| corpus | tenant | clips | right, unrestricted | right, restricted |" in out
    pairs = [line for line in out if line.startswith("| recorded prompts | ")]
    assert len(pairs) == 7, out  # six pairs of es, fr, it, ru, then all of them
    assert re.fullmatch(
        r"\| recorded prompts \| all pairs \| 12 \| [\d.]+% \| [\d.]+% \|", pairs[-1]
    )
    assert not any("espeak" in line for line in out)


def test_stream_breakdown_one_round() -> None:
    out = run("stream_breakdown.py", "5", "1")
    assert re.search(r"one file of [\d.]+ s, 1 round\(s\)", out), out
    parts = ("to submit", "wait", "first window", "delivery", "first delta", "done")
    for side in ("staged", "whole file first"):
        line = next(line for line in out.splitlines() if line.startswith(f"  {side}: "))
        for part in parts:  # median [min–max]
            assert re.search(rf"[:;] {part} -?\d+\.\d\d \[-?\d+\.\d\d–-?\d+\.\d\d\]", line), line


def test_unload_memory_one_cycle() -> None:
    out = run("unload_memory.py", "1").splitlines()
    assert re.fullmatch(r"started, both loaded, nothing run: \d+ MiB", out[0]), out
    assert re.fullmatch(r"both unloaded: \d+ MiB", out[1]), out
    assert "| model | cycle | loaded, after a transcription | after /unload | released |" in out
    for model in ("tiny.en", "base"):
        assert any(
            re.fullmatch(rf"\| {model} \| 1 \| \d+ \| \d+ \| -?\d+ \|", line) for line in out
        )


def test_tune_diarization_on_one_gating_conversation_of_each_kind() -> None:
    """The grid, the naming thresholds and the long file's first stage, printed (on the
    gating speakers: the tuning ones stay out of the repository)."""
    args = ("--gating", "--count", "1", "--long", "1", "--long-minutes", "8")
    out = run("tune_diarization.py", *args).splitlines()
    assert out[0] == "gating speakers, 1 conversations each"
    long = out[out.index("1 meetings of 8 minutes, 4 voices each") + 1 :]
    assert [line.split(":")[0].strip() for line in long] == [
        *(f"FIRST_LINK {v}" for v in ("0.45", "0.50", "0.55", "0.60", "0.65", "0.70")),
        "one pass",
    ]
    assert all(re.search(r"DER [\d.]+ at 0, [\d.]+ at 0.25, count [01]/1$", line) for line in long)
    rows = [line for line in out if line.startswith("LINK ")]
    assert len(rows) == 5 * 4 * 2
    assert all(re.search(r"none: DER [\d.]+ at 0, .* overlap: DER [\d.]+ at 0", r) for r in rows)
    named = [line for line in out if line.startswith("SAME_VOICE ")]
    assert len(named) == 6 and all(re.search(r"named right [01]\.\d{4}$", line) for line in named)


def test_librispeech_voices_splits_a_source_folder(tmp_path: Path) -> None:
    """A source laid out as Resemblyzer's: each train-clean speaker put in one set, the
    test-other speaker in the gating one, the gating files copied, the manifest written."""
    source, target = tmp_path / "audio_data", tmp_path / "voices"
    rng = np.random.default_rng(0)
    train = source / "librispeech_train-clean-100"
    other = source / "librispeech_test-other" / "42"
    for folder in (train, other):
        folder.mkdir(parents=True)
    for speaker in range(3):
        noise = 0.1 * rng.standard_normal(12 * 16000)
        write_float_wav(train / f"{100 + speaker}-1-0000.wav", noise)
        (train / f"{100 + speaker}-1-0000.wav").rename(train / f"{100 + speaker}-1-0000.flac")
    for index in range(4):
        write_float_wav(other / f"42-7-{index:04}.flac", 0.1 * rng.standard_normal(6 * 16000))
    run("librispeech_voices.py", "--source", str(source), "--target", str(target))
    speakers = json.loads((target / "voices.json").read_text())["speakers"]
    assert {s["id"] for s in speakers} == {"100", "101", "102", "42"}
    assert all(s["set"] == "gating" for s in speakers)  # the first 48 of train-clean: all
    assert {s["group"] for s in speakers} <= {"low", "high"}
    copied = {p.name for p in target.rglob("*.flac")}
    gating = {f.rsplit("/", 1)[-1] for s in speakers if s["set"] == "gating" for f in s["files"]}
    assert copied == gating
