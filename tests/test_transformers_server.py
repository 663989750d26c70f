"""A server on the transformers engine (``make run ENGINE=transformers``) serves every way
a user calls it: the synchronous route with word timestamps, its stream with token
log probabilities, a job, a Batch API line, whisper-asr-webservice's ``/asr`` and a live
session through the ``openai`` client; and ``/v1/scheduler`` says which engine runs and why.
One server, JFK's speech throughout."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from asrserve.audio.decode import decode
from asrserve.bench.live import pcm16
from asrserve.bench.wer import wer
from tests.support.batches import client_for, create_batch, line, upload_audio, wait_ended
from tests.support.realtime_client import TRANSCRIPTION, connect, receive, send_audio, settle
from tests.support.realtime_client import update as update_session
from tests.support.servers import JFK, REAL_SPEECH, Server

pytestmark = pytest.mark.slow
REFERENCE = json.loads((REAL_SPEECH / "references.json").read_text())["jfk.flac"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("transformers-server") / "data"
    srv = Server(data, env={"ASRSERVE_ENGINE": "transformers"})
    srv.start(timeout=180.0)
    yield srv
    srv.stop()


def _heard(text: str) -> float:
    return wer([REFERENCE], [text])


def test_files_jobs_batches_and_asr_on_the_transformers_engine(
    server: Server, tmp_path: Path
) -> None:
    with httpx.Client(base_url=server.url, timeout=120) as http:
        scheduler = http.get("/v1/scheduler").json()
        assert scheduler["engine"] == "transformers"
        assert scheduler["engine_choice"]["reason"] == "set by ASRSERVE_ENGINE"

        form = {"response_format": "verbose_json", "timestamp_granularities[]": "word"}
        with JFK.open("rb") as audio:
            verbose = http.post("/v1/audio/transcriptions", files={"file": audio}, data=form)
        assert verbose.status_code == 200, verbose.text
        answer = verbose.json()
        assert _heard(answer["text"]) <= 0.1, answer["text"]
        words = answer["words"]
        assert [w["start"] for w in words] == sorted(w["start"] for w in words)
        assert all(0 <= w["start"] <= w["end"] <= answer["duration"] for w in words)

        streamed = {"stream": "true", "include[]": "logprobs"}
        with JFK.open("rb") as audio:
            events = http.post("/v1/audio/transcriptions", files={"file": audio}, data=streamed)
        data = [json.loads(x[6:]) for x in events.text.splitlines() if x.startswith("data: ")]
        done = data[-1]
        assert done["type"] == "transcript.text.done" and _heard(done["text"]) <= 0.1
        assert "".join(t["token"] for t in done["logprobs"]).strip() == done["text"]

        with JFK.open("rb") as audio:
            job = http.post("/v1/jobs", files={"file": audio}).json()
        finished = http.get(f"/v1/jobs/{job['id']}", params={"wait": 60}).json()
        assert finished["status"] == "succeeded", finished
        transcript = http.get(f"/v1/jobs/{job['id']}/transcript").json()
        assert _heard(transcript["text"]) <= 0.1

        with JFK.open("rb") as audio:
            asr = http.post("/asr", params={"output": "srt"}, files={"audio_file": audio})
        assert asr.status_code == 200 and "\n00:00:00," in "\n" + asr.text

    client = client_for(server)
    [file_id] = upload_audio(client, [JFK])
    batch_id = create_batch(client, [line("jfk", file_id)], tmp_path)
    batch = wait_ended(server, batch_id)
    assert batch["status"] == "completed" and batch["request_counts"]["completed"] == 1
    output = client.files.content(batch["output_file_id"]).text
    body = json.loads(output.splitlines()[0])["response"]["body"]
    assert _heard(body["text"]) <= 0.1


def test_a_live_session_on_the_transformers_engine(server: Server) -> None:
    speech = pcm16(decode(JFK, 60), 24000)
    silence = np.zeros(2 * 24000, dtype="<i2").tobytes()  # the last turn ends
    with connect(server) as connection:
        assert receive(connection)["type"] == "session.created"
        audio_input = {"turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}
        update_session(connection, audio_input, [])
        assert receive(connection)["type"] == "session.updated"
        send_audio(connection, speech + silence, 24000, 2)
        events = settle(connection)
    completed = [e["transcript"] for e in events if e["type"] == f"{TRANSCRIPTION}.completed"]
    assert completed and _heard(" ".join(completed)) <= 0.15, completed
