"""Known speakers' references at intake, asked of the app in this process (the stores,
uploads, probes, VAD, scheduler and speaker models real; the Whisper forward pass a fake):
a reference without speech is refused before anything is stored, and an admitted one is
kept as a blob beside the job's audio, not in its stored options, until the job ends."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

import numpy as np

from asrserve.bench.conversations import build, reference
from asrserve.bench.corpus import write_float_wav
from tests.support.api import submit_job, wait_job
from tests.support.faults import listing
from tests.support.inprocess import in_process


def data_url(samples: np.ndarray, path: Path) -> str:
    wav = write_float_wav(path, samples).read_bytes()
    return "data:audio/wav;base64," + base64.b64encode(wav).decode()


def diarized(names: list[str], references: list[str]) -> dict[str, object]:
    return {
        "response_format": "diarized_json",
        "known_speaker_names[]": names,
        "known_speaker_references[]": references,
    }


def test_a_reference_without_speech_is_refused_at_intake(tmp_path: Path) -> None:
    talk = build(1)
    path = write_float_wav(tmp_path / "talk.wav", talk.samples)
    silence = data_url(np.zeros(3 * 16000, dtype=np.float32), tmp_path / "silence.wav")
    data_dir = tmp_path / "data"
    with in_process(data_dir) as app, path.open("rb") as audio:
        answer = app.client.post(
            "/v1/jobs", files={"file": ("talk.wav", audio)}, data=diarized(["Ann"], [silence])
        )
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert (error["param"], error["message"]) == (
            "known_speaker_references[]",
            "the reference of 'Ann' holds no speech",
        )
        assert app.client.get("/v1/jobs").json()["data"] == []
    assert listing(data_dir) == set()  # nothing of it stayed behind


def test_references_are_blobs_beside_the_audio_until_the_job_ends(tmp_path: Path) -> None:
    talk = build(1)
    path = write_float_wav(tmp_path / "talk.wav", talk.samples)
    voice = talk.speakers[0]
    url = data_url(reference(voice, talk), tmp_path / "reference.wav")
    data_dir = tmp_path / "data"
    with in_process(data_dir) as app:
        app.engines[0].gate.clear()  # the job waits at the device
        job = submit_job(app.client, path, **diarized(["Ann"], [url]))  # type: ignore[arg-type]
        kept = [name for name in listing(data_dir) if name.endswith(".reference0")]
        assert kept == [f"audio/{job['id']}.reference0"]
        stored = sqlite3.connect(data_dir / "asrserve.db").execute("SELECT * FROM jobs").fetchall()
        assert url.split(",")[1][:64] not in repr(stored)  # the row names the blob only
        app.engines[0].gate.set()
        done = wait_job(app.client, job["id"])
        assert done["status"] == "succeeded", done
        assert not [name for name in listing(data_dir) if ".reference" in name]
