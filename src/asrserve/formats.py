"""Rendering a :class:`Transcript` in every response format users expect."""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from asrserve.errors import InvalidRequest
from asrserve.subtitles import CueLimits, timed_texts
from asrserve.transcript import Segment, TokenLogprob, Transcript

SUBTITLES = CueLimits()  # the cues' shape when a request gives no limits


class ResponseFormat(StrEnum):
    JSON = "json"
    TEXT = "text"
    SRT = "srt"
    VTT = "vtt"
    VERBOSE_JSON = "verbose_json"
    DIARIZED_JSON = "diarized_json"  # OpenAI's: segments labelled with their speakers

    @property
    def media_type(self) -> str:
        return {
            ResponseFormat.JSON: "application/json",
            ResponseFormat.VERBOSE_JSON: "application/json",
            ResponseFormat.DIARIZED_JSON: "application/json",
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


def to_srt(transcript: Transcript, limits: CueLimits = SUBTITLES) -> str:
    """Numbered cues cut to ``limits`` (see :mod:`asrserve.subtitles`)."""
    blocks = []
    for index, (start, end, text, speaker) in enumerate(timed_texts(transcript, limits), 1):
        span = f"{timestamp(start, decimal=',')} --> {timestamp(end, decimal=',')}"
        said = text if speaker is None else f"{speaker}: {text}"  # the speaker first
        blocks.append(f"{index}\n{span}\n{said}\n")
    return "\n".join(blocks)


def to_vtt(transcript: Transcript, limits: CueLimits = SUBTITLES) -> str:
    """WebVTT cues cut to ``limits`` (see :mod:`asrserve.subtitles`)."""
    blocks = ["WEBVTT\n"]
    for start, end, text, speaker in timed_texts(transcript, limits):
        span = f"{timestamp(start, decimal='.')} --> {timestamp(end, decimal='.')}"
        said = text if speaker is None else f"<v {speaker}>{text}"  # WebVTT's voice tag
        blocks.append(f"{span}\n{said}\n")
    return "\n".join(blocks)


def to_verbose(transcript: Transcript, *, words: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "task": transcript.task,
        "language": transcript.language,
        "duration": transcript.duration,
        "text": transcript.text,
        "segments": [  # each with its ``speaker`` where the transcript was diarized
            segment.model_dump(
                exclude={"words", "logprobs"} | ({"speaker"} if segment.speaker is None else set())
            )
            for segment in transcript.segments
        ],
        "usage": {"type": "duration", "seconds": round(transcript.duration)},
    }
    if words:
        body["words"] = [
            {"word": w.word.strip(), "start": w.start, "end": w.end} for w in transcript.words
        ]
    return body


def diarized_segment(segment: Segment) -> dict[str, Any]:
    """A segment as OpenAI's ``transcript.text.segment`` (a diarized answer's, or a streamed
    event's)."""
    return {
        "type": "transcript.text.segment",
        "id": f"seg_{segment.id}",
        "start": segment.start,
        "end": segment.end,
        "text": segment.text.strip(),
        "speaker": segment.speaker or "",
    }


def to_diarized(transcript: Transcript) -> dict[str, Any]:
    """OpenAI's ``diarized_json``; :class:`InvalidRequest` for a transcript that was not
    diarized (its segments have no speakers)."""
    if any(segment.speaker is None for segment in transcript.segments):
        raise InvalidRequest(
            "this transcript has no speakers: ask for them with response_format=diarized_json",
            param="response_format",
        )
    return {
        "task": "transcribe",
        "duration": transcript.duration,
        "text": transcript.text,
        "segments": [diarized_segment(segment) for segment in transcript.segments],
        "usage": {"type": "duration", "seconds": round(transcript.duration)},
    }


def render(
    transcript: Transcript,
    fmt: ResponseFormat,
    *,
    words: bool = False,
    cues: CueLimits | None = None,
    logprobs: bool = False,
) -> str | dict[str, Any]:
    """A JSON-able dict for the JSON formats, text otherwise; subtitles cut to ``cues``
    (None: the defaults); ``json`` with its tokens' ``logprobs`` if asked for
    (``include[]=logprobs``, which only json carries)."""
    if fmt is ResponseFormat.JSON:
        if logprobs:
            return {"text": transcript.text, "logprobs": logprobs_view(transcript.logprobs)}
        return {"text": transcript.text}
    if fmt is ResponseFormat.VERBOSE_JSON:
        return to_verbose(transcript, words=words)
    if fmt is ResponseFormat.DIARIZED_JSON:
        return to_diarized(transcript)
    if fmt is ResponseFormat.SRT:
        return to_srt(transcript, cues or SUBTITLES)
    if fmt is ResponseFormat.VTT:
        return to_vtt(transcript, cues or SUBTITLES)
    return transcript.text + "\n"


def logprobs_view(tokens: Iterable[TokenLogprob]) -> list[dict[str, Any]]:
    """Tokens' log probabilities as OpenAI writes them: ``token``, ``logprob``, ``bytes``."""
    return [token.model_dump() for token in tokens]


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


def to_tsv(transcript: Transcript, limits: CueLimits = SUBTITLES) -> str:
    """Whisper's tsv: a header, then start and end in integer milliseconds (no decimal
    separator a locale could change) and the text, a cue a line (cut to ``limits``, its
    lines joined by a space)."""
    lines = ["start\tend\ttext\n"]
    for start, end, cue, _speaker in timed_texts(transcript, limits):
        text = " ".join(cue.replace("\t", " ").split("\n"))
        lines.append(f"{round(start * 1000)}\t{round(end * 1000)}\t{text}\n")
    return "".join(lines)


def to_whisper_json(transcript: Transcript) -> dict[str, Any]:
    """Whisper's result dict: the text as the segments' texts joined, the segments with all
    their fields (``words`` None unless word timestamps were asked for; ``speaker`` when
    diarized, as whisperX writes it), the language."""
    return {
        "text": "".join(segment.text for segment in transcript.segments),
        "segments": [
            segment.model_dump(
                exclude={"logprobs"} | ({"speaker"} if segment.speaker is None else set())
            )
            for segment in transcript.segments
        ],
        "language": transcript.language,
    }


def render_whisper(
    transcript: Transcript, output: WhisperOutput, cues: CueLimits | None = None
) -> str:
    """``output``'s file; vtt, srt and tsv cut to ``cues`` (None: the defaults)."""
    if output is WhisperOutput.JSON:
        return json.dumps(to_whisper_json(transcript), ensure_ascii=False)
    if output is WhisperOutput.VTT:
        return to_vtt(transcript, cues or SUBTITLES)
    if output is WhisperOutput.SRT:
        return to_srt(transcript, cues or SUBTITLES)
    if output is WhisperOutput.TSV:
        return to_tsv(transcript, cues or SUBTITLES)
    return to_lines(transcript)
