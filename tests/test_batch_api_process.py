"""The Batch API across a crash: a real server process on the real model, SIGKILLed mid-batch
and started again over the same data dir, resumes the batch with no request lost or done
twice, and its results are the real transcripts.

Only the process is the claim here; the Batch API's semantics are proved in this process with
a fake engine by tests/test_batch_api.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asrserve.bench.corpus import Clip
from asrserve.bench.wer import wer
from tests.support.batches import client_for, create_batch, line, upload_audio, wait_ended, wait_for
from tests.support.servers import Server

pytestmark = pytest.mark.slow


def test_kill_and_restart_mid_batch_resumes_without_loss_or_duplicates(
    make_server: type[Server], corpus: list[Clip], tmp_path: Path
) -> None:
    # The two shortest clips (3 s and 5 s, two containers): 24 of them take tiny.en a few
    # seconds on two cores, finishing a few at a time, so the kill finds most in flight.
    clips = sorted(corpus, key=lambda clip: clip.duration)[:2]
    data = tmp_path / "data"
    server = make_server(data).start()
    client = client_for(server)
    audio_ids = upload_audio(client, [clip.path for clip in clips])
    lines = [line(f"r{index}", audio_ids[index % len(clips)]) for index in range(24)]
    expected = {f"r{index}": clips[index % len(clips)] for index in range(24)}
    batch_id = create_batch(client, lines, tmp_path)
    before = wait_for(server, batch_id, lambda b: b["request_counts"]["completed"] >= 4)
    server.kill()
    assert before["request_counts"]["completed"] < 24, "the batch finished before the kill"

    restarted = make_server(data).start()
    batch = wait_ended(restarted, batch_id)
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 24, "completed": 24, "failed": 0}
    client = client_for(restarted)
    content = client.files.content(batch["output_file_id"]).text
    output = [json.loads(row) for row in content.splitlines()]
    ids = [row["custom_id"] for row in output]
    assert len(ids) == len(set(ids)) == 24 and set(ids) == set(expected)
    assert batch["error_file_id"] is None
    texts = {row["custom_id"]: row["response"]["body"]["text"] for row in output}
    assert wer([c.text for c in expected.values()], [texts[k] for k in expected]) <= 0.15
