"""Results as they happen: the long corpus clip (over two minutes, five windows) streamed
through the official ``openai`` client and over plain HTTP, and the job it makes followed at
``/v1/jobs/{id}/events``.

The claims are the streaming path's (server-sent events, deltas from the windows as they
finish, the job's progress), so the app runs in this process with a fake engine
(``tests/support/inprocess.py``): the upload, decode, VAD, windows, scheduler and stores are
real, the forward pass answers each window with its own text, and a
:class:`~tests.support.turnstile.Turnstile` holds the passes after the first, which is how
"the text arrives before the file is done" is shown without timing anything. On the real
model, streamed text equal to the plain answer is
``test_bench.py::test_bench_stream_scenario`` (a minute of audio, several windows) and,
through the ``openai`` client, ``test_openai_params_e2e.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx2
import openai
import pytest

from asrserve.bench.corpus import Clip
from tests.support.api import transcribe_text
from tests.support.inprocess import URL, InProcess, in_process
from tests.support.turnstile import Turnstile


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with in_process(tmp_path_factory.mktemp("streaming") / "data") as running:
        yield running


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """(event name, data) of each event of a server-sent event stream; comments skipped."""
    name: str | None = None
    for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield name, json.loads(line.removeprefix("data: "))
            name = None


def follow(client: httpx2.Client, job_id: str) -> list[tuple[str | None, dict[str, Any]]]:
    with client.stream("GET", f"/v1/jobs/{job_id}/events") as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(sse_events(response.iter_lines()))


def test_the_openai_client_streams_the_same_text_as_the_plain_answer(
    app: InProcess, long_clip: Clip
) -> None:
    # not closed after: it would close the app's client, which it was lent
    oai = openai.OpenAI(base_url=f"{URL}/v1", api_key="x", max_retries=0, http_client=app.client)
    with long_clip.path.open("rb") as audio:
        stream = oai.audio.transcriptions.create(model="whisper-1", file=audio, stream=True)
        events = list(stream)
    deltas = [event.delta for event in events if event.type == "transcript.text.delta"]
    done = events[-1]
    assert done.type == "transcript.text.done", events
    assert len(events) == len(deltas) + 1
    assert len(deltas) >= 5, deltas
    assert "".join(deltas) == done.text
    assert done.text == transcribe_text(app.client, long_clip.path)
    assert done.to_dict()["usage"] == {"type": "duration", "seconds": round(long_clip.duration)}


def test_text_arrives_before_the_file_is_done_and_the_job_can_be_followed(
    app: InProcess, long_clip: Clip
) -> None:
    """The first delta comes while the job still runs (its first window alone is done: the
    engine lets one forward pass through and holds the rest until then);
    ``/v1/jobs/{id}/events``, opened meanwhile, tells the same job's progress and final
    segments; the finished job shows every window done."""
    http = app.client
    (engine,) = app.engines
    engine.gate = turnstile = Turnstile()
    turnstile.hold()
    turnstile.let(1)  # the first window's pass
    deltas: list[str] = []
    try:
        with (
            long_clip.path.open("rb") as audio,
            ThreadPoolExecutor(1) as pool,
            http.stream(
                "POST",
                "/v1/audio/transcriptions",
                files={"file": (long_clip.path.name, audio)},
                data={"model": "whisper-1", "stream": "true"},
            ) as response,
        ):
            assert response.status_code == 200
            job_id = response.headers["x-job-id"]
            followed: Future[list[tuple[str | None, dict[str, Any]]]] = pool.submit(
                follow, http, job_id
            )
            at_first_delta: dict[str, Any] | None = None
            for _, data in sse_events(response.iter_lines()):
                if data["type"] == "transcript.text.delta":
                    deltas.append(data["delta"])
                    if at_first_delta is None:
                        at_first_delta = http.get(f"/v1/jobs/{job_id}").json()
                        turnstile.set()  # the rest of the file
                else:
                    assert data["type"] == "transcript.text.done", data
                    text = data["text"]
            events = followed.result()
    finally:
        turnstile.set()
    assert at_first_delta is not None and at_first_delta["status"] == "running", at_first_delta
    # the first text came while windows were left: totals grow as the file is decoded
    progress, total = at_first_delta["progress"], events[-1][1]["progress"]
    assert 1 <= progress["chunks_done"] < total["chunks_total"] == 5, (progress, total)
    assert progress["chunks_done"] <= progress["chunks_total"] <= total["chunks_total"]
    assert 0 < progress["audio_done_s"] < total["audio_total_s"]
    assert "".join(deltas) == text

    names = [name for name, _ in events]
    assert names[-1] == "done" and "segment" in names, names
    done = [chunks["chunks_done"] for name, chunks in events if name == "progress"]
    assert done == sorted(done), done
    segments = [data for name, data in events if name == "segment"]
    assert [segment["id"] for segment in segments] == list(range(len(segments)))
    assert "".join(segment["text"] for segment in segments).strip() == text
    final = events[-1][1]
    assert final["status"] == "succeeded" and final["result"]["text"] == text
    assert final["progress"]["chunks_done"] == final["progress"]["chunks_total"] == 5
    assert final["progress"]["eta_s"] == 0.0
