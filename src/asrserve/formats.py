"""Rendering a :class:`Transcript` in every response format users expect."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from asrserve.transcript import Transcript


class ResponseFormat(StrEnum):
    JSON = "json"
    TEXT = "text"
    SRT = "srt"
    VTT = "vtt"
    VERBOSE_JSON = "verbose_json"

    @property
    def media_type(self) -> str:
        return {
            ResponseFormat.JSON: "application/json",
            ResponseFormat.VERBOSE_JSON: "application/json",
            ResponseFormat.TEXT: "text/plain; charset=utf-8",
            ResponseFormat.SRT: "application/x-subrip; charset=utf-8",
            ResponseFormat.VTT: "text/vtt; charset=utf-8",
        }[self]


def timestamp(seconds: float, *, decimal: str) -> str:
    """``HH:MM:SS,mmm`` (SRT, ``decimal=","``) or ``HH:MM:SS.mmm`` (VTT)."""
    millis = max(0, round(seconds * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal}{millis:03d}"


def to_srt(transcript: Transcript) -> str:
    blocks = []
    for index, segment in enumerate(transcript.segments, start=1):
        start = timestamp(segment.start, decimal=",")
        end = timestamp(segment.end, decimal=",")
        blocks.append(f"{index}\n{start} --> {end}\n{segment.text.strip()}\n")
    return "\n".join(blocks)


def to_vtt(transcript: Transcript) -> str:
    blocks = ["WEBVTT\n"]
    for segment in transcript.segments:
        start = timestamp(segment.start, decimal=".")
        end = timestamp(segment.end, decimal=".")
        blocks.append(f"{start} --> {end}\n{segment.text.strip()}\n")
    return "\n".join(blocks)


def to_verbose(transcript: Transcript, *, words: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task": transcript.task,
        "language": transcript.language,
        "duration": transcript.duration,
        "text": transcript.text,
        "segments": [segment.model_dump(exclude={"words"}) for segment in transcript.segments],
        "usage": {"type": "duration", "seconds": round(transcript.duration)},
    }
    if words:
        body["words"] = [
            {"word": w.word.strip(), "start": w.start, "end": w.end} for w in transcript.words
        ]
    return body


def render(
    transcript: Transcript, fmt: ResponseFormat, *, words: bool = False
) -> str | dict[str, Any]:
    """A JSON-able dict for the JSON formats, text otherwise."""
    if fmt is ResponseFormat.JSON:
        return {"text": transcript.text}
    if fmt is ResponseFormat.VERBOSE_JSON:
        return to_verbose(transcript, words=words)
    if fmt is ResponseFormat.SRT:
        return to_srt(transcript)
    if fmt is ResponseFormat.VTT:
        return to_vtt(transcript)
    return transcript.text + "\n"
