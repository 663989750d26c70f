"""Rendering a :class:`Transcript` in every response format users expect."""

from __future__ import annotations

import json
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
        "segments": [
            segment.model_dump(exclude={"words", "logprobs"}) for segment in transcript.segments
        ],
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


class WhisperOutput(StrEnum):
    """whisper-asr-webservice's ``output``: the files Whisper's own writers make."""

    TXT = "txt"
    VTT = "vtt"
    SRT = "srt"
    TSV = "tsv"
    JSON = "json"


def to_lines(transcript: Transcript) -> str:
    """One segment a line (Whisper's txt writer)."""
    return "".join(f"{segment.text.strip()}\n" for segment in transcript.segments)


def to_tsv(transcript: Transcript) -> str:
    """Whisper's tsv: a header, then start and end in integer milliseconds (no decimal
    separator a locale could change) and the text, a segment a line."""
    lines = ["start\tend\ttext\n"]
    for segment in transcript.segments:
        text = segment.text.strip().replace("\t", " ")
        lines.append(f"{round(segment.start * 1000)}\t{round(segment.end * 1000)}\t{text}\n")
    return "".join(lines)


def to_whisper_json(transcript: Transcript) -> dict[str, Any]:
    """Whisper's result dict: the text as the segments' texts joined, the segments with all
    their fields (``words`` None unless word timestamps were asked for), the language."""
    return {
        "text": "".join(segment.text for segment in transcript.segments),
        "segments": [segment.model_dump(exclude={"logprobs"}) for segment in transcript.segments],
        "language": transcript.language,
    }


def render_whisper(transcript: Transcript, output: WhisperOutput) -> str:
    if output is WhisperOutput.JSON:
        return json.dumps(to_whisper_json(transcript), ensure_ascii=False)
    if output is WhisperOutput.VTT:
        return to_vtt(transcript)
    if output is WhisperOutput.SRT:
        return to_srt(transcript)
    if output is WhisperOutput.TSV:
        return to_tsv(transcript)
    return to_lines(transcript)
