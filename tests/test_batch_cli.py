"""``asrserve batch run``: a folder through the Batch API, locally and against a server."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asrserve.bench.corpus import Clip
from tests.support.servers import Server

pytestmark = pytest.mark.slow


def run_batch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asrserve.cli", "batch", "run", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=None if env is None else {**os.environ, **env},
    )


@pytest.fixture
def folder(corpus: list[Clip], tmp_path: Path) -> tuple[Path, list[Clip]]:
    """The three shortest clips (three containers) and one file that is not audio."""
    audio = tmp_path / "audio"
    audio.mkdir()
    clips = sorted(corpus, key=lambda clip: clip.duration)[:3]
    for clip in clips:
        shutil.copy(clip.path, audio / clip.path.name)
    (audio / "broken.wav").write_bytes(b"not audio")
    (audio / "notes.md").write_text("not picked up")
    return audio, clips


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


def assert_transcribed(text: str, clip: Clip) -> None:
    """At least 60% of the reference's words appear (tiny.en on synthetic speech)."""
    reference = words(clip.text)
    assert len(words(text) & reference) >= 0.6 * len(reference), (text, clip.text)


def assert_partial_failure(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 1, result.stderr
    assert "3 completed, 1 failed of 4" in result.stdout
    assert re.search(r"failed: broken\.wav: .*audio", result.stdout), result.stdout


def test_local_mode_writes_srt_next_to_the_audio(
    folder: tuple[Path, list[Clip]], tmp_path: Path
) -> None:
    audio, clips = folder
    temp = tmp_path / "tmp"  # the private server's data dir goes here, and is removed
    temp.mkdir()
    result = run_batch(str(audio), "--format", "srt", env={"TMPDIR": str(temp)})
    assert_partial_failure(result)
    for clip in clips:
        srt = (audio / f"{clip.path.stem}.srt").read_text()
        assert srt.startswith("1\n") and re.search(r"^\d\d:\d\d:\d\d,\d{3} --> ", srt, re.M)
        assert_transcribed(srt, clip)
    expected = {"broken.wav", "notes.md"} | {c.path.name for c in clips}
    assert {p.name for p in audio.iterdir()} == expected | {f"{c.path.stem}.srt" for c in clips}
    assert "transcribe" in result.stderr  # the progress bar
    assert not list(temp.glob("asrserve-batch-*"))  # the temporary data dir is gone


def test_against_a_server_writes_txt_into_out(
    folder: tuple[Path, list[Clip]], tmp_path: Path, make_server: type[Server]
) -> None:
    audio, clips = folder
    server = make_server(tmp_path / "data").start()
    out = tmp_path / "out"
    result = run_batch(str(audio), "--format", "txt", "--url", server.url, "--out", str(out))
    assert_partial_failure(result)
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{c.path.stem}.txt" for c in clips)
    for clip in clips:
        assert_transcribed((out / f"{clip.path.stem}.txt").read_text(), clip)
    assert not list(audio.glob("*.txt"))


def test_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "readme.md").write_text("no audio here")
    empty = run_batch(str(tmp_path), "--url", "http://127.0.0.1:9")
    assert empty.returncode == 2 and "no audio files" in empty.stderr
    missing = run_batch(str(tmp_path / "nope"), "--url", "http://127.0.0.1:9")
    assert missing.returncode == 2 and "not a directory" in missing.stderr
    bad_format = run_batch(str(tmp_path), "--format", "docx")
    assert bad_format.returncode == 2
