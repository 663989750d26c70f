"""``asrserve bench diarize``'s and ``diarize-hour``'s own arithmetic: each conversation's
figures, their speech-weighted sums, and the speaker passes read from a server's log."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from asrserve.bench.conversations import Conversation
from asrserve.bench.der import Labelled
from asrserve.bench.diarize import judged, summary
from asrserve.bench.diarize_hour import _passes


def conversation(turns: list[Labelled], seconds: float) -> Conversation:
    speakers = sorted({str(t.speaker) for t in turns})
    return Conversation(np.zeros(int(seconds * 16000), np.float32), turns, speakers, (), 0.0)


def test_a_conversation_is_judged_at_both_collars() -> None:
    talk = conversation([Labelled(0.0, 4.0, "a"), Labelled(4.0, 8.0, "b")], 9.0)
    found = [Labelled(0.0, 4.5, "x"), Labelled(4.5, 8.0, "y")]  # the change half a second late
    row = judged(talk, found, 2.0)
    assert (row["speakers"], row["found"]) == (2, 2)
    assert row["der_collar_0"] == pytest.approx(0.5 / 8)
    assert row["der_collar_025"] == pytest.approx(0.25 / 7.0, abs=1e-4)  # 0.25 s past the collar
    assert (row["audio_s"], row["seconds"]) == (9.0, 2.0)


def test_the_summary_weights_each_conversation_by_its_speech() -> None:
    long = judged(conversation([Labelled(0.0, 90.0, "a")], 90.0), [Labelled(0.0, 90.0, "x")], 1)
    short = judged(
        conversation([Labelled(0.0, 10.0, "a")], 10.0), [Labelled(0.0, 5.0, "x")], 1
    )  # half missed
    total = summary([long, short])
    assert total["der_collar_0"] == pytest.approx(5.0 / 100.0)
    assert total["speakers_right"] == 2
    assert total["seconds_per_audio_hour"] == pytest.approx(2 / 100 * 3600)


def test_speaker_passes_are_read_from_the_log_after_a_point(tmp_path: Path) -> None:
    records = [
        {"msg": "batch", "task": "embed", "size": 8, "compute_ms": 400.0},  # before
        {"msg": "batch", "task": "embed", "size": 16, "compute_ms": 500.0},
        {"msg": "batch", "task": "segment", "size": 4, "compute_ms": 400.0},
        {"msg": "batch", "task": "transcribe", "size": 16, "compute_ms": 900.0},
        {"msg": "job succeeded"},
    ]
    lines = [json.dumps(record) + "\n" for record in records]
    log = tmp_path / "serve.log"
    log.write_text("".join(lines))
    passes = _passes(log, len(lines[0]), log.stat().st_size)
    assert passes == {
        "embed": {"items_per_device_s": 32.0, "mean_batch": 16, "passes": 1},
        "segment": {"items_per_device_s": 10.0, "mean_batch": 4, "passes": 1},
    }
