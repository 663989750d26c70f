"""The live bench's view of a session: which turns still wait for their final text, so a
session waits for late turns instead of leaving them out of the delays; when each spoken
word was first shown."""

from __future__ import annotations

import asyncio

import pytest

from asrserve.bench.live import SessionLog, _Events
from asrserve.bench.live_words import spoken_words, word_lags


def test_a_session_is_settled_once_every_started_turn_has_ended() -> None:
    async def main() -> None:
        events = _Events(SessionLog(), start=0.0)
        assert events.settled.is_set()  # nothing said yet: nothing to wait for
        events.on({"type": "input_audio_buffer.speech_started", "item_id": "a"})
        events.on({"type": "input_audio_buffer.speech_started", "item_id": "b"})
        events.on({"type": "input_audio_buffer.speech_stopped", "item_id": "a", "audio_end_ms": 0})
        completed = "conversation.item.input_audio_transcription.completed"
        events.on({"type": completed, "item_id": "a", "transcript": "hello"})
        assert (events.opened, events.settled.is_set()) == ({"b"}, False)
        failed = "conversation.item.input_audio_transcription.failed"
        events.on({"type": failed, "item_id": "b"})
        assert (events.opened, events.settled.is_set()) == (set(), True)
        assert (events.log.heard, len(events.log.turns), len(events.log.errors)) == (
            ["hello"],
            1,
            1,
        )

    asyncio.run(main())


def test_a_words_lag_runs_from_its_end_to_the_first_delta_holding_it() -> None:
    spoken = spoken_words(
        [
            {"word": "Ask", "start": 0.0, "end": 0.4},
            {"word": "not,", "start": 0.4, "end": 0.9},
            {"word": "what", "start": 1.0, "end": 1.3},
            {"word": "your", "start": 1.3, "end": 1.5},
        ],
        offset=10.0,
    )
    # "what" was heard as "who": it lines up with nothing and has no lag
    shown = [(11.5, "ask not"), (12.0, " who your")]
    assert word_lags(shown, spoken) == pytest.approx([1.1, 0.6, 0.5])


def test_delta_words_before_the_commit_count_as_shown_early() -> None:
    events = _Events(SessionLog(), start=0.0)
    delta = "conversation.item.input_audio_transcription.delta"
    events.on({"type": "input_audio_buffer.speech_started", "item_id": "a"})
    events.on({"type": delta, "item_id": "a", "delta": "the quick", "audio_end_ms": 0})
    events.on({"type": "input_audio_buffer.committed", "item_id": "a"})
    events.on({"type": delta, "item_id": "a", "delta": " brown fox", "audio_end_ms": 0})
    assert events.log.early == 2
    assert [text for _, text in events.log.shown["a"]] == ["the quick", " brown fox"]
