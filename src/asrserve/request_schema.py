"""The request schema: every field a transcription request may carry, declared once with its
type, bounds, default and description, however the request arrives (a multipart form, a
Batch API line's body, a live session's settings, ``/asr``'s query parameters, the CLI).

Each way in hands its fields over as text (each name → its values, :data:`Fields`);
:meth:`RequestForm.of` validates them into typed values or raises :class:`InvalidRequest`
naming the field at fault, and the OpenAPI descriptions of the forms are this model's JSON
schema (``api/openapi.py``). What needs more than one field, the served models or the
caller's key (a model's languages, a format's needs) is checked in ``requests.py``, which
turns a form into the work's options. A new parameter is a field here and the code that
uses it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Annotated, ClassVar, Literal, Self, cast

from annotated_types import Ge, Le
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from asrserve import openai_params, outbound
from asrserve.errors import InvalidRequest
from asrserve.formats import ResponseFormat
from asrserve.settings.keep_alive import parse_keep_alive
from asrserve.subtitles import LIMITS
from asrserve.vocabulary import KEYWORD_SEPARATOR, MAX_SPEAKERS, Chunking

Fields = Mapping[str, Sequence[str]]

MAX_PROMPT_CHARS = 1000
"""Whisper conditions on at most 223 prompt tokens (half its 448-token context, less one),
the last ones of a longer prompt; English prose averages about 3.7 characters a token with
Whisper's tokenizer (names and jargon fewer), so 223 tokens are about 830 characters. A longer
prompt only costs time: it is tokenized whole (a 64 KiB one made a 3 s clip take 7.8 s)."""
MAX_LANGUAGES = 20  # detection among more is detection among all, only slower
MAX_KEYWORDS = 32  # keywords[]: terms
MAX_KEYWORD_CHARS = 64  # keywords[]: characters a term
MAX_KEYWORD_BYTES = 150
"""keywords[]' terms joined (UTF-8, :data:`KEYWORD_SEPARATOR` between them): at most 151
Whisper tokens with the space before them (a byte-level token is at least one byte), never
cut from the 223 a prompt has; the request's prompt and the text before a window keep at
least the other 72 (docs/decoding.md)."""


def _flag(value: object) -> object:
    """A boolean form field: ``true``/``false`` (or 1/0), any case."""
    if not isinstance(value, str):
        return value
    lowered = value.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise PydanticCustomError("invalid_request", "must be true or false")


def _keep_alive(value: object) -> object:
    try:
        return parse_keep_alive(cast(str | float, value))
    except ValueError as exc:
        raise PydanticCustomError("whole_message", str(exc)) from None


def _callback(value: str) -> str:
    try:
        outbound.parse(value)
    except outbound.InvalidUrl as exc:
        raise PydanticCustomError("invalid_callback_url", f"is not a usable URL: {exc}") from None
    return value


def _prompt(value: str) -> str:
    if len(value) > MAX_PROMPT_CHARS:
        raise PydanticCustomError(
            "prompt_too_long",
            f"is at most {MAX_PROMPT_CHARS} characters (Whisper uses only the last 223 tokens"
            " of a prompt, about 800 characters)",
        )
    if "<|" in value:  # "<|endoftext|>" in a prompt would end it as Whisper's own token
        raise PydanticCustomError(
            "invalid_request", "holds '<|', which Whisper's tokenizer reads as its own tokens"
        )
    return value


def keyword_refused(term: str) -> str | None:
    """Why ``keywords[]`` refuses a term, stripped already (empty, over
    :data:`MAX_KEYWORD_CHARS` characters, a control character or lone surrogate, or ``<|``,
    which the tokenizer reads as Whisper's own tokens); None if it takes it."""
    shown = repr(term[:20])
    if not term:
        return "holds an empty term"
    if len(term) > MAX_KEYWORD_CHARS:
        return f"takes terms of at most {MAX_KEYWORD_CHARS} characters, not {len(term)}"
    if any(unicodedata.category(char) in ("Cc", "Cs") for char in term):
        return f"term {shown} holds a control character or a lone surrogate"
    if "<|" in term:
        return f"term {shown} holds '<|', which Whisper's tokenizer reads as its own tokens"
    return None


def _keywords(terms: list[str]) -> list[str]:
    """Terms Whisper is prompted with (``keywords[]``): each stripped and taken by
    :func:`keyword_refused`; within :data:`MAX_KEYWORD_BYTES` joined."""
    stripped = [term.strip() for term in terms]
    for term in stripped:
        refused = keyword_refused(term)
        if refused is not None:
            raise PydanticCustomError("invalid_request", refused)
    size = len(KEYWORD_SEPARATOR.join(stripped).encode())
    if size > MAX_KEYWORD_BYTES:
        raise PydanticCustomError(
            "keywords_too_long",
            f"takes at most {MAX_KEYWORD_BYTES} bytes joined (UTF-8, with"
            f" {KEYWORD_SEPARATOR!r} between terms), not {size}: Whisper is prompted with at"
            f" most 223 tokens, these at most {MAX_KEYWORD_BYTES + 1} of them",
        )
    return stripped


def _whole(value: object) -> object:
    """A whole number however it is written (``10``, ``10.0``, ``1e1``); anything else is
    left for the integer check to refuse."""
    if not isinstance(value, str):
        return value
    try:
        number = float(value)
    except ValueError:
        return value
    return int(number) if number.is_integer() else value


Flag = Annotated[bool, BeforeValidator(_flag)]
Whole = Annotated[int | None, BeforeValidator(_whole)]


SUBTITLES = "srt and vtt only: "


class CueForm(BaseModel):
    """How subtitle cues are cut (``srt`` and ``vtt``; :class:`asrserve.subtitles.CueLimits`):
    given with a synchronous request, or when an async job's transcript is fetched."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    max_line_width: Whole = Field(
        None,
        ge=LIMITS["max_line_width"][0],
        le=LIMITS["max_line_width"][1],
        description=SUBTITLES + "characters per line.",
    )
    max_line_count: Whole = Field(
        None,
        ge=LIMITS["max_line_count"][0],
        le=LIMITS["max_line_count"][1],
        description=SUBTITLES + "lines per cue.",
    )
    max_words_per_cue: Whole = Field(
        None,
        ge=LIMITS["max_words_per_cue"][0],
        le=LIMITS["max_words_per_cue"][1],
        description=SUBTITLES + "words per cue (no limit if left out).",
    )
    max_cue_seconds: float | None = Field(
        None,
        ge=LIMITS["max_cue_seconds"][0],
        le=LIMITS["max_cue_seconds"][1],
        description=SUBTITLES + "a cue's longest duration.",
    )
    highlight_words: Flag = Field(
        False, description=SUBTITLES + "karaoke cues, the word being said underlined."
    )

    LISTS: ClassVar[frozenset[str]] = frozenset()
    COMPOSITE: ClassVar[frozenset[str]] = frozenset()  # read by :meth:`_composite`

    @classmethod
    def of(cls, fields: Fields) -> Self:
        """The fields (each name → its values, as text) validated; :class:`InvalidRequest`
        naming the first field at fault. A list field takes every value of ``name[]`` and
        ``name``, any other the last one given; an empty value is one not given."""
        given: dict[str, object] = {}
        for name, info in cls.model_fields.items():
            alias = info.alias or name
            if name in cls.COMPOSITE:
                continue
            if name in cls.LISTS:
                items = openai_params.values(fields, name)
                if items:
                    given[alias] = items
            else:
                values = fields.get(alias)
                if values and values[-1] != "":
                    given[alias] = values[-1]
        given |= cls._composite(fields)
        try:
            return cls.model_validate(given)
        except ValidationError as exc:
            raise _invalid(cls, exc) from None

    @classmethod
    def _composite(cls, fields: Fields) -> dict[str, object]:
        """Fields given in more than one shape, read before validation."""
        return {}

    @classmethod
    def names(cls, *, leave_out: frozenset[str] = frozenset()) -> frozenset[str]:
        """The names its fields are given by (a list field's as ``name[]`` and ``name``),
        but those of the fields in ``leave_out``."""
        kept = [(name, info) for name, info in cls.model_fields.items() if name not in leave_out]
        return frozenset({name for name, _ in kept} | {i.alias for _, i in kept if i.alias})


def _invalid(model: type[BaseModel], exc: ValidationError) -> InvalidRequest:
    """The first error, named by the field as it was given (its alias)."""
    error = exc.errors(include_url=False)[0]
    where = str(error["loc"][0])
    name, field = next(
        ((n, f) for n, f in model.model_fields.items() if where in (n, f.alias)), (where, None)
    )
    param = (field.alias if field is not None else None) or name
    kind = error["type"]
    if kind in _OWN:
        message = error["msg"] if kind == "whole_message" else f"{param} {error['msg']}"
        return InvalidRequest(message, param=param, code=_OWN[kind])
    if kind in ("float_parsing", "float_type"):
        return InvalidRequest(f"{param} must be a number", param=param)
    if kind == "int_parsing":
        return InvalidRequest(f"{param} must be {_integer_kind(error['input'])}", param=param)
    if kind in ("greater_than_equal", "less_than_equal", "finite_number") and field is not None:
        low = next(m.ge for m in field.metadata if isinstance(m, Ge))
        high = next(m.le for m in field.metadata if isinstance(m, Le))
        return InvalidRequest(f"{param} must be between {low:g} and {high:g}", param=param)
    if kind == "enum":
        return InvalidRequest(f"{param} must be one of {error['ctx']['expected']}", param=param)
    if kind == "literal_error":
        shown = repr(str(error["input"])[:40])
        return InvalidRequest(f"{param} takes {error['ctx']['expected']}, not {shown}", param=param)
    if kind == "too_long":
        limit = error["ctx"]["max_length"]
        return InvalidRequest(f"{param} takes at most {limit} values", param=param)
    return InvalidRequest(f"{param}: {error['msg']}", param=param)


_OWN: dict[str, str | None] = {
    "invalid_request": None,
    "whole_message": None,
    "prompt_too_long": "prompt_too_long",
    "keywords_too_long": "keywords_too_long",
    "invalid_callback_url": "invalid_callback_url",
}
"""The validators' own errors (:class:`PydanticCustomError`), by their type: the code
answered (None: the plain 400's). ``whole_message``'s text names the field itself."""


def _integer_kind(value: object) -> str:
    try:
        float(str(value))
    except ValueError:
        return "a number"
    return "a whole number"


DIARIZATION = frozenset(
    {"min_speakers", "max_speakers", "known_speaker_names", "known_speaker_references"}
)
"""The fields of diarized_json, a synchronous or async transcription's alone."""


Granularity = Literal["word", "segment"]
CHUNKING_SCHEMA = {
    "description": "How the file is split into speech: 'auto' (the default) or a server_vad "
    "object (as JSON, or as chunking_strategy[...] fields).",
    "oneOf": [
        {"type": "string", "enum": ["auto"]},
        {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["server_vad"]},
                **{
                    name: {
                        "type": "number" if isinstance(low, float) else "integer",
                        "minimum": low,
                        "maximum": high,
                    }
                    for name, (low, high) in openai_params.BOUNDS.items()
                },
            },
            "required": ["type"],
        },
    ],
}


class RequestForm(CueForm):
    """A transcription or translation request's fields (OpenAI's, and asrserve's own)."""

    model: str | None = Field(
        None,
        description="A served model's id, or 'whisper-1' for the default model, or"
        " 'gpt-4o-transcribe-diarize' for the default under OpenAI's diarizing model's rules"
        " (no prompt or logprobs; json, text or diarized_json; chunking_strategy past 30 s).",
    )
    language: str | None = Field(
        None, description="The speech's language (ISO-639-1); detected if left out."
    )
    languages: list[str] = Field(
        [],
        alias="languages[]",
        max_length=MAX_LANGUAGES,
        description="The languages the speech may be in (ISO-639-1): detected among these"
        " only, within the API key's own list; one is that language. Instead of language.",
    )
    keywords: Annotated[list[str], AfterValidator(_keywords)] = Field(
        [],
        alias="keywords[]",
        max_length=MAX_KEYWORDS,
        description=f"Terms to spell right (names, jargon): Whisper is prompted with them,"
        f" joined by {KEYWORD_SEPARATOR!r}, before the prompt, and each window keeps that"
        f" decode only where it spells a term its decode without them does not. At most"
        f" {MAX_KEYWORDS} terms of {MAX_KEYWORD_CHARS} characters, {MAX_KEYWORD_BYTES} bytes"
        f" (UTF-8) joined.",
    )
    prompt: Annotated[str, AfterValidator(_prompt)] | None = Field(
        None,
        description=f"Text the speech follows on from (names, spelling); at most"
        f" {MAX_PROMPT_CHARS} characters, without '<|' (Whisper's control tokens).",
    )
    response_format: ResponseFormat = Field(
        ResponseFormat.JSON, description="What the answer holds and how it is written."
    )
    temperature: float = Field(
        0.0, ge=0.0, le=1.0, description="The first decode's temperature; the fallback goes higher."
    )
    timestamp_granularities: list[Granularity] = Field(
        [],
        alias="timestamp_granularities[]",
        description="word: each word's times (response_format=verbose_json).",
    )
    beam_size: Whole = Field(
        None,
        ge=1,
        le=20,
        description="Beams searched (1: greedy); the model's default if left out.",
    )
    include: list[Literal["logprobs"]] = Field(
        [],
        alias="include[]",
        description="logprobs: each text token's log probability (response_format=json"
        " only; decodes greedily, beam_size 1).",
    )
    chunking_strategy: Annotated[Chunking | None, WithJsonSchema(CHUNKING_SCHEMA)] = None
    deadline_s: float | None = Field(
        None,
        ge=0.001,
        le=7 * 86400,
        description="Drop the work (504) if no device has started it by then.",
    )
    keep_alive: (
        Annotated[float, BeforeValidator(_keep_alive), WithJsonSchema({"type": "string"})] | None
    ) = Field(
        None,
        description="How long the model stays loaded after this request: seconds or a"
        " duration (5m); -1 forever, 0 unloaded once done (Ollama's keep_alive).",
    )
    callback_url: Annotated[str, AfterValidator(_callback)] | None = Field(
        None,
        json_schema_extra={"format": "uri"},
        description="Async jobs: POSTed the job JSON when it finishes.",
    )
    stream: Flag = Field(False, description="Answer server-sent events as the text becomes final.")
    min_speakers: Whole = Field(
        None, ge=1, le=MAX_SPEAKERS, description="diarized_json: the fewest speakers to tell apart."
    )
    max_speakers: Whole = Field(
        None, ge=1, le=MAX_SPEAKERS, description="diarized_json: the most speakers to tell apart."
    )
    known_speaker_names: list[str] = Field(
        [],
        alias="known_speaker_names[]",
        description="diarized_json: names of speakers given by reference (up to 4).",
    )
    known_speaker_references: list[str] = Field(
        [],
        alias="known_speaker_references[]",
        description="diarized_json: a data URL of 2-10 s of each named speaker's audio.",
    )

    LISTS: ClassVar[frozenset[str]] = frozenset(
        {
            "languages",
            "keywords",
            "timestamp_granularities",
            "include",
            "known_speaker_names",
            "known_speaker_references",
        }
    )

    COMPOSITE: ClassVar[frozenset[str]] = frozenset({"chunking_strategy"})

    @classmethod
    def _composite(cls, fields: Fields) -> dict[str, object]:
        """``chunking_strategy``: one field holding JSON, or one field per key."""
        chunking = openai_params.chunking(fields)
        return {} if chunking is None else {"chunking_strategy": chunking}

    @property
    def granularities(self) -> set[str]:
        return set(self.timestamp_granularities)
