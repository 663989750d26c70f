"""The words every floor of the service shares: what a transcription is asked to do
(:class:`TranscriptionOptions`, its :class:`Task`, :class:`Chunking` and
:class:`Diarization`) and how soon (:class:`Priority`). The engine, the audio pipeline, the
batcher, the stores and the request schema all speak them; this module imports nothing of
the service, so that each of them can.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum, StrEnum

from pydantic import BaseModel, ConfigDict, Field

MAX_SPEAKERS = 15  # the most speakers a diarization tells apart
KEYWORD_SEPARATOR = ", "  # between the terms of keywords[], joined into one text


def keyword_text(keywords: Sequence[str]) -> str | None:
    """A request's keywords as the one text Whisper is prompted with (faster-whisper's
    ``hotwords``): each term stripped, joined by :data:`KEYWORD_SEPARATOR`; None: none."""
    return KEYWORD_SEPARATOR.join(term.strip() for term in keywords) or None


class Priority(IntEnum):
    """Lower runs first."""

    INTERACTIVE = 0
    ASYNC = 1
    OFFLINE = 2  # Batch API items


class Task(StrEnum):
    TRANSCRIBE = "transcribe"
    TRANSLATE = "translate"  # into English
    DETECT = "detect"  # the spoken language only: no segments
    EMBED = "embed"  # voice embeddings of a file's clips, for diarization (no Whisper)
    SEGMENT = "segment"  # who speaks when in 10 s chunks, for diarization (no Whisper)


class Chunking(BaseModel):
    """How a file is split into speech (OpenAI's ``chunking_strategy`` of type
    ``server_vad``), for the VAD that finds it: the speech threshold, the pause that ends a
    region, and the audio kept each side of a region. The defaults are the ``auto`` split."""

    model_config = ConfigDict(frozen=True)

    threshold: float = Field(0.5, ge=0.0, le=1.0)
    silence_duration_ms: int = Field(160, ge=0, le=10_000)
    prefix_padding_ms: int = Field(400, ge=0, le=5_000)


class KnownSpeaker(BaseModel):
    """A speaker the caller names, and a 2–10 s recording of their voice: base64 of the
    bytes sent until intake keeps them as a blob beside the job's audio (``audio_path``,
    what a stored job holds); decoded where the diarization runs."""

    model_config = ConfigDict(frozen=True)

    name: str
    audio: str = ""
    audio_path: str = ""


class Diarization(BaseModel):
    """Speaker labels asked for (``response_format=diarized_json``, ``/asr``'s
    ``diarize=true``): how many speakers the caller says there are, and who some are."""

    model_config = ConfigDict(frozen=True)

    min_speakers: int = Field(1, ge=1, le=MAX_SPEAKERS)
    max_speakers: int = Field(MAX_SPEAKERS, ge=1, le=MAX_SPEAKERS)
    known: tuple[KnownSpeaker, ...] = ()


class TranscriptionOptions(BaseModel):
    """Decoding options that travel with a job; those that differ cannot share a batch."""

    model_config = ConfigDict(frozen=True)

    model: str = ""  # the served model's id; "" (a job stored before models had ids): the default
    language: str | None = None
    prompt: str | None = None
    # Terms to spell right (OpenAI's keywords[]): their text opens each window's prompt,
    # before the request's prompt and the text said before the window (docs/decoding.md).
    keywords: tuple[str, ...] = ()
    temperature: float = Field(0.0, ge=0.0, le=1.0)
    word_timestamps: bool = False
    beam_size: int = Field(5, ge=1, le=20)
    task: Task = Task.TRANSCRIBE
    # Each text token's log probability in the segments (OpenAI's include[]=logprobs):
    # a greedy or sampled decode, whose per-step distributions CTranslate2 reports.
    logprobs: bool = False
    chunking: Chunking | None = None  # None: the server's own split ("auto")
    # No language given, a multilingual model: the language is detected among these only
    # (the caller's key allows no other; empty: among all). Cleared once it is known, so
    # that the windows of tenants with different lists still share batches.
    languages: tuple[str, ...] = ()
    # Who spoke when, joined to the words (None: not asked). Not a decoding option: the
    # transcriber runs it beside the windows, which it submits without it.
    diarization: Diarization | None = None
