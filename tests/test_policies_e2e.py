"""Each batching policy end to end: real model, real HTTP, concurrent callers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from asrserve.bench.conversations import build
from asrserve.bench.corpus import Clip, write_float_wav
from asrserve.bench.wer import wer
from tests.support.servers import Server

pytestmark = pytest.mark.slow


def transcribe(url: str, clip: Clip, **fields: str) -> httpx.Response:
    with clip.path.open("rb") as fh:
        return httpx.post(
            f"{url}/v1/audio/transcriptions",
            files={"file": fh},
            data={"model": "whisper-1", **fields},
            timeout=300,
        )


@pytest.mark.parametrize("policy", ["greedy", "window", "none"])
def test_policy_serves_concurrent_callers(
    policy: str, corpus: list[Clip], make_server: type[Server], tmp_path: Path
) -> None:
    env = {
        "ASRSERVE_BATCH_POLICY": policy,
        "ASRSERVE_BEAM_SIZE": "1",
        "ASRSERVE_MAX_WAIT_MS": "200",
    }
    server = make_server(tmp_path / policy, env=env).start()
    clips = [clip for clip in corpus if clip.duration <= 30][:8]
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda c: transcribe(server.url, c), clips))
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    score = wer([c.text for c in clips], [r.json()["text"] for r in responses])
    view = httpx.get(f"{server.url}/v1/scheduler").json()
    print(f"{policy}: WER {score:.4f}, mean batch {view['mean_batch_size']:.2f}")
    assert score <= 0.2
    assert view["policy"] == policy and view["pending_chunks"] == 0
    if policy == "none":
        assert view["batch_sizes"] == {"1": 8}  # whole files, one at a time
    else:
        assert view["mean_batch_size"] > 1.0  # eight callers at once share passes
    metrics = httpx.get(f"{server.url}/metrics").text
    assert "asrserve_batch_size_bucket" in metrics
    assert 'asrserve_queued_chunks{priority="interactive"} 0.0' in metrics
    assert "asrserve_padding_waste_ratio" in metrics
    if policy == "none":  # faster-whisper's transcribe on the whole file, speakers beside it
        assert speakers(server.url, tmp_path) == ["A", "B"]


def speakers(url: str, folder: Path) -> list[str]:
    """The speakers of a diarized two-voice conversation, in order of first speech."""
    conversation = build(104, voices=["reader", "allison"])
    path = write_float_wav(folder / "talk.wav", conversation.samples)
    with path.open("rb") as fh:
        response = httpx.post(
            f"{url}/v1/audio/transcriptions",
            files={"file": fh},
            data={"model": "whisper-1", "response_format": "diarized_json"},
            timeout=300,
        )
    assert response.status_code == 200, response.text
    said = [segment["speaker"] for segment in response.json()["segments"]]
    return sorted(set(said), key=said.index)


def test_expired_deadline_drops_the_request(
    corpus: list[Clip], make_server: type[Server], tmp_path: Path
) -> None:
    server = make_server(tmp_path / "data", env={"ASRSERVE_BEAM_SIZE": "1"}).start()
    long_clip = max(corpus, key=lambda clip: clip.duration)
    with ThreadPoolExecutor(2) as pool:
        busy = pool.submit(transcribe, server.url, long_clip)  # keeps the device busy
        late = pool.submit(transcribe, server.url, corpus[0], deadline_s="0.05")
        response = late.result()
        assert busy.result().status_code == 200
    assert response.status_code == 504, response.text
    assert response.json()["error"]["code"] == "deadline_exceeded"
    view = httpx.get(f"{server.url}/v1/scheduler").json()
    assert view["dropped"] >= 1
