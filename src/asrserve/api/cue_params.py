"""The cue-shaping query parameters of the routes that answer subtitles from a query
(``GET /v1/jobs/{id}/transcript``, ``POST /asr``): taken as text, so that
:func:`asrserve.requests.parse_cue_limits` checks them (a 400 naming the parameter, as for
the form fields), and described in the OpenAPI document."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from asrserve.requests import Fields
from asrserve.subtitles import LIMITS, CueLimits

DEFAULTS = CueLimits()


def _limit(name: str, what: str, default: object) -> str:
    low, high = LIMITS[name]
    return f"{what} ({low:g}-{high:g}; default {default}). Subtitle formats only."


Width = Annotated[
    str | None,
    Query(description=_limit("max_line_width", "Characters a line", DEFAULTS.max_line_width)),
]
Count = Annotated[
    str | None,
    Query(description=_limit("max_line_count", "Lines a cue", DEFAULTS.max_line_count)),
]
Words = Annotated[
    str | None, Query(description=_limit("max_words_per_cue", "Words a cue", "no limit"))
]
Seconds = Annotated[
    str | None,
    Query(description=_limit("max_cue_seconds", "Seconds a cue", DEFAULTS.max_cue_seconds)),
]
Highlight = Annotated[
    str | None,
    Query(description="true: karaoke, a cue per word with the word underlined (srt, vtt)"),
]


def cue_fields(
    max_line_width: Width = None,
    max_line_count: Count = None,
    max_words_per_cue: Words = None,
    max_cue_seconds: Seconds = None,
    highlight_words: Highlight = None,
) -> Fields:
    """The shaping parameters given, as fields (each name → its value)."""
    given = {
        "max_line_width": max_line_width,
        "max_line_count": max_line_count,
        "max_words_per_cue": max_words_per_cue,
        "max_cue_seconds": max_cue_seconds,
        "highlight_words": highlight_words,
    }
    return {name: [value] for name, value in given.items() if value is not None}
