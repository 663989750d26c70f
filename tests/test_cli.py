"""The console script: start-up errors and local transcription, as processes of their own;
and retention, the app in this process with a fake engine (``tests/support/inprocess.py``:
the stores, the data dir and the sweeper real)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from asrserve.bench.corpus import Clip
from asrserve.cli.main import build_settings, parser
from tests.support.inprocess import in_process
from tests.support.wait import wait_until


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asrserve.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_missing_model_is_a_clear_startup_error(tmp_path: Path) -> None:
    result = run_cli("serve", "--model", str(tmp_path / "nope"), "--port", "0")
    assert result.returncode == 2
    assert "is not a CTranslate2 Whisper model directory" in result.stderr
    assert "a Hugging Face repo id (org/name)" in result.stderr


def test_a_model_not_cached_while_offline_is_a_clear_startup_error(tmp_path: Path) -> None:
    result = run_cli("serve", "--model", "large-v3", "--offline", "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert "'large-v3' (Systran/faster-whisper-large-v3) is not in the model cache" in result.stderr


def test_flags_override_settings() -> None:
    args = parser().parse_args(
        [
            "serve",
            "--port",
            "9001",
            "--batch-policy",
            "window",
            "--devices",
            "cuda:0,cuda:1",
            "--beam-size",
            "2",
        ]
    )
    settings = build_settings(args)
    assert (settings.port, settings.batch_policy, settings.beam_size) == (9001, "window", 2)
    assert settings.device == "cuda" and settings.device_index == (0, 1)


def test_distributed_flags_and_a_worker_needs_a_broker(tmp_path: Path) -> None:
    args = parser().parse_args(
        ["worker", "--broker", "redis://10.0.0.5:6379/1", "--shared-dir", "/mnt/asr"]
    )
    settings = build_settings(args)
    assert settings.broker == "redis://10.0.0.5:6379/1" and settings.distributed
    assert settings.files_dir == Path("/mnt/asr/files")
    assert parser().parse_args(["serve", "--broker", "redis://x", "--inference"]).inference
    result = run_cli("worker", "--data-dir", str(tmp_path))
    assert result.returncode == 2 and "needs --broker" in result.stderr


def test_env_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASRSERVE_MAX_BATCH_SIZE", "7")
    monkeypatch.setenv("ASRSERVE_DEVICE_INDEX", "0,2")
    settings = build_settings(parser().parse_args(["serve"]))
    assert settings.max_batch_size == 7 and settings.device_index == (0, 2)


@pytest.mark.slow
def test_transcribe_files_locally(corpus: list[Clip], tmp_path: Path) -> None:
    clips = [corpus[0], corpus[1]]
    result = run_cli(
        "transcribe",
        *(str(c.path) for c in clips),
        "--format",
        "srt",
        "--out",
        str(tmp_path),
        "--beam-size",
        "1",
    )
    assert result.returncode == 0, result.stderr
    for clip in clips:
        srt = (tmp_path / f"{clip.path.stem}.srt").read_text()
        assert srt.startswith("1\n00:00:")
    single = run_cli("transcribe", str(clips[0].path), "--beam-size", "1")
    assert single.returncode == 0 and single.stdout.strip()
    assert f"{clips[0].path.name}: 100%" in single.stderr, single.stderr  # the progress bar
    bad = run_cli("transcribe", str(tmp_path / "missing.wav"))
    assert bad.returncode == 1 and "missing.wav" in bad.stderr


def test_audio_is_removed_per_retention(corpus: list[Clip], tmp_path: Path) -> None:
    data = tmp_path / "data"
    with in_process(data, {"ASRSERVE_AUDIO_RETENTION_S": "1"}) as app:
        http = app.client
        with corpus[0].path.open("rb") as fh:
            job = http.post("/v1/jobs", files={"file": fh}).json()
        done = http.get(f"/v1/jobs/{job['id']}", params={"wait": 60}).json()
        assert done["status"] == "succeeded"
        wait_until(lambda: not any((data / "audio").iterdir()), 15, "the audio to be swept")
        again = http.get(f"/v1/jobs/{job['id']}/transcript")
        assert again.json() == {"text": done["result"]["text"]}  # it outlives the audio
