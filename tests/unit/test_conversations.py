"""The diarization corpus (bench/voices.py, bench/conversations.py): tuning and gating
speakers apart, one recording of each voice a conversation, overlap where and as long as
it is said to be, and a reference no turn plays."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from asrserve.bench.conversations import OVERLAP_S, PAUSE_S, build
from asrserve.bench.voices import SAMPLE_RATE, VOICES, Voice, pieces

RATE = SAMPLE_RATE


def burst(seconds: float, seed: int) -> np.ndarray:
    """Noise as loud as speech for ``seconds``: one run of speech to the corpus's eyes."""
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal(int(seconds * RATE))).astype(np.float32)


def pool(count: int = 6) -> list[Voice]:
    """Voices of two recordings each, every turn's length telling its voice and recording
    (voice v, recording r, turn t: 1.5 + 0.1 v + 0.01 r + 0.001 t seconds)."""
    out = []
    for v in range(count):
        recordings = tuple(
            tuple(
                burst(1.5 + 0.1 * v + 0.01 * r + 0.001 * t, 100 * v + 10 * r + t) for t in range(4)
            )
            for r in range(2)
        )
        out.append(Voice(f"v{v}", "low" if v % 2 else "high", recordings, burst(3.0, v)))
    return out


def source(length: int) -> tuple[int, int]:
    """The (voice, recording) a turn's length tells."""
    seconds = length / RATE - 1.5
    return round(seconds // 0.1), round((seconds % 0.1) // 0.01)


def test_the_tuning_and_gating_speakers_are_apart() -> None:
    speakers = json.loads((VOICES / "voices.json").read_text())["speakers"]
    by_set = {
        kind: {s["id"] for s in speakers if s["set"] == kind} for kind in ("tuning", "gating")
    }
    assert by_set["tuning"] and by_set["gating"] and not by_set["tuning"] & by_set["gating"]


@pytest.mark.parametrize("seed", range(8))
def test_each_voice_plays_one_recording_a_conversation(seed: int) -> None:
    voices = pool()
    talk = build(seed, voices)
    lengths = {v.name: {len(t): source(len(t)) for r in v.recordings for t in r} for v in voices}
    heard: dict[str, set[int]] = {}
    for turn in talk.turns:
        length = round((turn.end - turn.start) * RATE)
        matches = [k for k in lengths[str(turn.speaker)] if abs(k - length) <= RATE // 50]
        heard.setdefault(str(turn.speaker), set()).add(source(matches[0])[1])
    assert all(len(recordings) == 1 for recordings in heard.values()), heard


def test_a_quarter_of_turn_changes_overlap_by_what_they_are_said_to() -> None:
    """Over many conversations with overlap: about one change in four starts 0.3-1.5 s
    before the turn before it ends, the others 0.2-1.2 s after it."""
    overlaps = changes = 0
    for seed in range(60):
        talk = build(seed, pool(), with_overlap=True)
        for before, after in zip(talk.turns, talk.turns[1:], strict=False):
            changes += 1
            gap = after.start - before.end
            if gap < 0:
                overlaps += 1
                assert OVERLAP_S[0] - 0.02 <= -gap <= OVERLAP_S[1] + 0.02
            else:
                assert PAUSE_S[0] - 0.02 <= gap <= PAUSE_S[1] + 0.02
        pairs = zip(talk.turns, talk.turns[1:], strict=False)
        said = sum(max(0.0, before.end - after.start) for before, after in pairs)
        assert talk.overlap_s == pytest.approx(said, abs=0.05)
    assert 0.15 <= overlaps / changes <= 0.3


def test_without_overlap_no_turns_overlap() -> None:
    for seed in range(20):
        talk = build(seed, pool())
        assert talk.overlap_s == 0
        assert all(b.start >= a.end for a, b in zip(talk.turns, talk.turns[1:], strict=False))


def test_an_utterance_is_cut_at_its_pauses_into_turns() -> None:
    rng = random.Random(0)
    silence = np.zeros(int(0.3 * RATE), np.float32)
    parts = [burst(rng.uniform(0.8, 2.0), i) for i in range(6)]
    utterance = np.concatenate([p for part in parts for p in (part, silence)])
    cut = pieces(utterance)
    edge = RATE // 50  # 20 ms
    assert 2 <= len(cut) < len(parts)  # joined to turns of 1.5 s or more, at pauses
    assert all(len(p) >= 1.5 * RATE - edge for p in cut[:-1])
    assert all(np.abs(p[:edge]).max() > 0.05 for p in cut)  # trimmed to speech, to 20 ms
    assert all(np.abs(p[-edge:]).max() > 0.05 for p in cut)
