"""The server events of a turn's text, in OpenAI's realtime shapes (the same in its beta and
GA protocols), without ``event_id`` (the edge numbers them).

``logprobs``: the tokens' log probabilities, ``[{"token", "logprob", "bytes"}]``, sent
only when the session's ``include`` asks for them (:attr:`SessionConfig.logprobs`); None
leaves the field out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from asrserve.errors import AsrError

Event = dict[str, Any]
Logprobs = Sequence[dict[str, Any]] | None
TRANSCRIPTION = "conversation.item.input_audio_transcription"


def delta(item: str, text: str, audio_end_ms: int, logprobs: Logprobs = None) -> Event:
    event: Event = {
        "type": f"{TRANSCRIPTION}.delta",
        "item_id": item,
        "content_index": 0,
        "delta": text,
        "audio_end_ms": audio_end_ms,  # ours: the audio this text was decoded from
    }
    return _with(event, logprobs)


def completed(item: str, text: str, seconds: float, logprobs: Logprobs = None) -> Event:
    """``usage`` is the turn's audio (OpenAI's ``duration`` usage: what whisper-1 bills)."""
    event: Event = {
        "type": f"{TRANSCRIPTION}.completed",
        "item_id": item,
        "content_index": 0,
        "transcript": text,
        "usage": {"type": "duration", "seconds": round(seconds, 3)},
    }
    return _with(event, logprobs)


def failed(item: str, exc: AsrError) -> Event:
    """The turn's text cannot be had; the session goes on."""
    return {
        "type": f"{TRANSCRIPTION}.failed",
        "item_id": item,
        "content_index": 0,
        "error": exc.body()["error"],
    }


def _with(event: Event, logprobs: Logprobs) -> Event:
    if logprobs is not None:
        event["logprobs"] = list(logprobs)
    return event
