"""The live bench's view of a session: which turns still wait for their final text, so a
session waits for late turns instead of leaving them out of the delays."""

from __future__ import annotations

import asyncio

from asrserve.bench.live import SessionLog, _Events


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
