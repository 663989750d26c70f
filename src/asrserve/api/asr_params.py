"""The query parameters of whisper-asr-webservice's routes (``POST /asr``,
``POST /detect-language``), each with its description in the OpenAPI document; the values
are checked where the routes turn them into a request (``asr_webservice_routes.py``)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query

from asrserve.formats import WhisperOutput
from asrserve.request_schema import MAX_PROMPT_CHARS
from asrserve.vocabulary import MAX_SPEAKERS

Encode = Annotated[
    bool, Query(description="Decode the upload with FFmpeg; false: it is raw PCM s16le 16 kHz mono")
]
Model = Annotated[
    str | None, Query(description="asrserve's own: a served model id; omitted, the default")
]
TaskParam = Annotated[
    Literal["transcribe", "translate"],
    Query(description="`transcribe`, or `translate` the speech into English"),
]
Language = Annotated[
    str | None,
    Query(
        description="The speech's language (ISO-639-1); omitted, the key's default (or its "
        "only language), else detected"
    ),
]
Prompt = Annotated[
    str | None,
    Query(
        description="Text the speech follows on from (names, spelling); at most "
        f"{MAX_PROMPT_CHARS} characters"
    ),
]
WordTimestamps = Annotated[
    bool,
    Query(
        description="Each word's times: in `json`, each segment's `words`; `srt`, `vtt` and "
        "`tsv` are cut from them whatever this says"
    ),
]
Output = Annotated[
    WhisperOutput,
    Query(
        description="The transcript's format: `txt`, `vtt`, `srt`, `tsv` (a row a cue) or "
        "`json` (Whisper's result dict)"
    ),
]
_WITH = "With `diarize=true` only (without it: 400)"
MinSpeakers = Annotated[
    int | None,
    Query(
        description=f"{_WITH}: the fewest speakers to tell apart, 1-{MAX_SPEAKERS} (else 400); "
        "omitted, 1"
    ),
]
MaxSpeakers = Annotated[
    int | None,
    Query(
        description=f"{_WITH}: the most speakers to tell apart, 1-{MAX_SPEAKERS} (else 400); "
        f"omitted, {MAX_SPEAKERS}"
    ),
]
