"""The ``none`` batching policy end to end: the real model behind a real server, concurrent
callers, each file whole through faster-whisper's own ``transcribe`` (one at a time), the
speakers of a diarized conversation joined to it.

The policies that share forward passes (``greedy``, ``window``) are asked of the app in this
process, with a fake forward pass, in ``tests/test_policies_inprocess.py``; a request whose
deadline passes before it runs is ``tests/test_api_inprocess.py``'s.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from asrserve.bench.conversations import build
from asrserve.bench.corpus import Clip, write_float_wav
from asrserve.bench.voices import debian
from asrserve.bench.wer import wer
from tests.support.servers import Server

pytestmark = pytest.mark.slow


def transcribe(url: str, clip: Clip) -> httpx.Response:
    with clip.path.open("rb") as fh:
        return httpx.post(
            f"{url}/v1/audio/transcriptions",
            files={"file": fh},
            data={"model": "whisper-1"},
            timeout=300,
        )


def test_none_policy_serves_concurrent_callers_whole_files(
    corpus: list[Clip], make_server: type[Server], tmp_path: Path
) -> None:
    env = {
        "ASRSERVE_BATCH_POLICY": "none",
        "ASRSERVE_BEAM_SIZE": "1",
        "ASRSERVE_MAX_WAIT_MS": "200",
    }
    server = make_server(tmp_path / "none", env=env).start()
    clips = [clip for clip in corpus if clip.duration <= 30][:8]
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda c: transcribe(server.url, c), clips))
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    score = wer([c.text for c in clips], [r.json()["text"] for r in responses])
    view = httpx.get(f"{server.url}/v1/scheduler").json()
    print(f"none: WER {score:.4f}, mean batch {view['mean_batch_size']:.2f}")
    assert score <= 0.2
    assert view["policy"] == "none" and view["pending_chunks"] == 0
    assert view["batch_sizes"] == {"1": 8}  # whole files, one at a time
    metrics = httpx.get(f"{server.url}/metrics").text
    assert "asrserve_batch_size_bucket" in metrics
    assert 'asrserve_queued_chunks{priority="interactive"} 0.0' in metrics
    assert "asrserve_padding_waste_ratio" in metrics
    # faster-whisper's transcribe on the whole file, speakers beside it
    assert speakers(server.url, tmp_path) == ["A", "B"]


def speakers(url: str, folder: Path) -> list[str]:
    """The speakers of a diarized two-voice conversation, in order of first speech."""
    conversation = build(104, debian(), voices=["reader", "allison"])
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
