"""``asrserve bench --json``: the report's ``meta`` records the settings its servers ran with."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from asrserve.bench.load import AudioFile
from asrserve.bench.runner import REPORTED_SETTINGS, run_meta, server_settings, write_json
from asrserve.settings import Settings


@pytest.fixture(autouse=True)
def bare_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("ASRSERVE_"):
            monkeypatch.delenv(name)


def test_the_environment_the_flags_and_the_defaults_are_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A variable the servers inherit (not a flag) is recorded, and so is a default."""
    monkeypatch.setenv("ASRSERVE_FILL_WAIT_SHARE", "0")
    settings = server_settings({"ASRSERVE_MAX_BATCH_SIZE": "8"})
    assert settings["ASRSERVE_FILL_WAIT_SHARE"] == "0"
    assert settings["ASRSERVE_MAX_BATCH_SIZE"] == "8"
    assert settings["ASRSERVE_OFFLINE_RIDE_SHARE"] == "0"
    assert settings["ASRSERVE_OFFLINE_HOLDOFF_MS"] == "200"
    assert settings["ASRSERVE_ENCODER_WINDOWS_S"] == "5,10,15,20,30"
    assert settings["ASRSERVE_BATCH_POLICY"] == "greedy"
    assert settings["ASRSERVE_CPU_REPLICAS"] == "auto"
    # what moves a streamed answer's first text and the accuracy (issue 45)
    assert settings["ASRSERVE_FIRST_WINDOW_S"] == "15"
    assert (settings["ASRSERVE_VAD_FILTER"], settings["ASRSERVE_STAGED_DECODE"]) == ("true",) * 2
    assert "ASRSERVE_MODEL" not in settings  # unset: the models say what served


def test_the_recorded_values_set_the_same_settings_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASRSERVE_OFFLINE_RIDE_SHARE", "0.10")
    monkeypatch.setenv("ASRSERVE_ENCODER_WINDOW", "full")
    monkeypatch.setenv("ASRSERVE_STAGED_DECODE", "false")
    flags = {"ASRSERVE_CPU_REPLICAS": "2", "ASRSERVE_CPU_THREADS": "1", "ASRSERVE_MODEL": "/m"}
    recorded = server_settings(flags)
    ran = Settings(cpu_replicas=2, cpu_threads=1, model=Path("/m"))
    for name, value in recorded.items():
        monkeypatch.setenv(name, value)
    again = Settings()
    assert [getattr(again, name) for name in REPORTED_SETTINGS] == [
        getattr(ran, name) for name in REPORTED_SETTINGS
    ]


def test_the_report_carries_the_meta(tmp_path: Path) -> None:
    files = [AudioFile(tmp_path / name, 2.75, None, b"") for name in ("a.wav", "b.wav")]
    meta = run_meta(files, {"ASRSERVE_BEAM_SIZE": "1"}, "http://127.0.0.1:8000")
    write_json(tmp_path / "report.json", [], None, meta)
    body = json.loads((tmp_path / "report.json").read_text())
    assert body["meta"]["files"] == 2 and body["meta"]["audio_s"] == 5.5
    assert body["meta"]["settings"]["ASRSERVE_BEAM_SIZE"] == "1"
    assert body["meta"]["url"] == "http://127.0.0.1:8000"  # rows ran on that server's settings
    assert body["meta"]["cores"] >= 1
