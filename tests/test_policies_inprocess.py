"""The batching policies that share forward passes (``greedy``, ``window``) serve concurrent
callers in batches of more than one window, each caller getting its own transcript, and say so
in the scheduler's view and the metrics.

The app runs in this process (``tests/support/inprocess.py``): uploads, decoding, VAD and the
scheduler real, the forward pass a :class:`FakeEngine` that decodes a window to its length in
seconds; its ``gate`` holds the device on a job's window until every caller's window waits.
That batching leaves the real model's accuracy as it is, is ``tests/test_engine.py``'s claim;
the ``none`` policy (faster-whisper's whole-file path) needs the real model and runs in
``tests/test_policies_e2e.py``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.testclient import TestClient

from asrserve.bench.corpus import Clip
from tests.support.inprocess import in_process
from tests.support.wait import wait_until


def transcribe(http: TestClient, clip: Clip) -> httpx2.Response:
    with clip.path.open("rb") as fh:
        return http.post(
            "/v1/audio/transcriptions", files={"file": fh}, data={"model": "whisper-1"}
        )


@pytest.mark.parametrize("policy", ["greedy", "window"])
def test_policy_serves_concurrent_callers(policy: str, corpus: list[Clip], tmp_path: Path) -> None:
    env = {
        "ASRSERVE_BATCH_POLICY": policy,
        "ASRSERVE_BEAM_SIZE": "1",
        "ASRSERVE_MAX_WAIT_MS": "200",
    }
    *clips, other = [clip for clip in corpus if clip.duration <= 30][:9]
    with in_process(tmp_path / policy, env) as app, ThreadPoolExecutor(8) as pool:
        http = app.client
        (engine,) = app.engines
        engine.gate.clear()  # a job's one window holds the device while the callers come
        with other.path.open("rb") as fh:
            assert http.post("/v1/jobs", files={"file": fh}).status_code == 202
        assert engine.entered.wait(10), "the job's window never reached the device"
        answers = [pool.submit(transcribe, http, clip) for clip in clips]

        def all_waiting() -> dict[str, Any] | None:  # each caller's one window, pending
            view: dict[str, Any] = http.get("/v1/scheduler").json()
            return view if view["pending_chunks"] == len(clips) else None

        wait_until(all_waiting, 30, "every caller's window to be pending", every=0.02)
        engine.gate.set()
        responses = [answer.result() for answer in answers]
        assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
        # the fake decodes a window to its length: each caller has its own clip's text
        heard = [float(r.json()["text"]) for r in responses]
        assert heard == pytest.approx([clip.duration for clip in clips], abs=0.1)
        view = http.get("/v1/scheduler").json()
        assert view["policy"] == policy and view["pending_chunks"] == 0
        assert view["mean_batch_size"] > 1.0  # eight callers at once share passes
        metrics = http.get("/metrics").text
    assert "asrserve_batch_size_bucket" in metrics
    assert 'asrserve_queued_chunks{priority="interactive"} 0.0' in metrics
    assert "asrserve_padding_waste_ratio" in metrics
