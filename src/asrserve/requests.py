"""A transcription request's options, validated: from field values (a multipart form's
fields, a Batch API line's body) to :class:`TranscriptionRequest`, or :class:`InvalidRequest`
naming the field at fault."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from asrserve import openai_params, outbound
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest
from asrserve.formats import ResponseFormat
from asrserve.known_speakers import known_speakers
from asrserve.languages import ANY_LANGUAGE, LanguageRule
from asrserve.settings.keep_alive import parse_keep_alive
from asrserve.subtitles import LIMITS, CueLimits
from asrserve.vocabulary import MAX_SPEAKERS, Diarization, Task, TranscriptionOptions

GRANULARITIES = {"word", "segment"}
MAX_PROMPT_CHARS = 1000
"""Whisper conditions on at most 223 prompt tokens (half its 448-token context, less one),
the last ones of a longer prompt; English prose averages about 3.7 characters a token with
Whisper's tokenizer (names and jargon fewer), so 223 tokens are about 830 characters. A longer
prompt only costs time: it is tokenized whole (a 64 KiB one made a 3 s clip take 7.8 s)."""


@dataclass(frozen=True)
class TranscriptionRequest:
    options: TranscriptionOptions
    response_format: ResponseFormat
    words: bool  # word timestamps were asked for
    deadline_s: float | None  # drop the work if no device has started it by then
    callback_url: str | None = None
    stream: bool = False  # answer server-sent events as the text becomes final
    keep_alive: float | None = None  # the model's keep_alive after this work (None: default)
    cues: CueLimits | None = None  # how subtitles are cut (srt and vtt only)


Fields = Mapping[str, Sequence[str]]


class _Fields:
    def __init__(self, fields: Fields) -> None:
        self.fields = fields

    def get(self, name: str) -> str | None:
        values = self.fields.get(name)
        return values[-1] if values else None


def parse_request(
    fields: Fields,
    catalog: Catalog,
    *,
    callback: bool = False,
    task: Task = Task.TRANSCRIBE,
    shaping: bool = True,
    languages: LanguageRule = ANY_LANGUAGE,
) -> TranscriptionRequest:
    """Validate transcription options given as fields (each name → its values, as text),
    within the ``languages`` the caller's key allows. ``shaping``: the request may shape
    subtitle cues (false for an async job, whose cues are shaped when its transcript is
    fetched)."""
    for name, values in fields.items():
        if any(_surrogate(value) for value in values):
            raise InvalidRequest(
                f"{name} holds a lone surrogate (an unpaired \\ud800-\\udfff escape)",
                param=name,
                code="invalid_encoding",
            )
    given = _Fields(fields)
    model = catalog.resolve(given.get("model"), languages=languages)
    fmt = _response_format(given.get("response_format"))
    diarization = _diarization(fmt, task, given)  # a translation's format before its model
    _check_task(task, model)
    openai_params.refuse_unsupported(fields)
    logprobs = _logprobs(fields, fmt)
    granularities = _granularities(given)
    words = "word" in granularities
    subtitles = fmt in (ResponseFormat.SRT, ResponseFormat.VTT)
    needs = "response_format srt or vtt" if shaping else _AT_FETCH
    cues = parse_cue_limits(fields, subtitles and shaping, needs=needs)
    if words and fmt is not ResponseFormat.VERBOSE_JSON:
        raise InvalidRequest(
            "timestamp_granularities requires response_format=verbose_json",
            param="timestamp_granularities[]",
        )
    language = _language(given.get("language"), model, languages, task)
    options = TranscriptionOptions(
        model=model.id,
        task=task,
        language=language,
        languages=languages.allowed if language is None and model.multilingual else (),
        prompt=_prompt(given.get("prompt")),
        temperature=_number(given.get("temperature"), "temperature", 0.0, 1.0, 0.0),
        # cues are cut at words' times, and words are what speakers are joined to
        word_timestamps=words or subtitles or diarization is not None,
        beam_size=_beam_size(given.get("beam_size"), model, logprobs=logprobs),
        logprobs=logprobs,
        chunking=openai_params.chunking(fields),
        diarization=diarization,
    )
    deadline = given.get("deadline_s")
    deadline_s = None if not deadline else _number(deadline, "deadline_s", 0.001, 7 * 86400, 0)
    callback_url = parse_callback(given.get("callback_url")) if callback else None
    return TranscriptionRequest(
        options=options,
        response_format=fmt,
        words=words,
        deadline_s=deadline_s,
        callback_url=callback_url,
        stream=_flag(given.get("stream"), "stream"),
        keep_alive=keep_alive_field(given.get("keep_alive")),
        cues=cues,
    )


SHAPING = (*LIMITS, "highlight_words")
"""The fields that shape subtitle cues (see :class:`asrserve.subtitles.CueLimits`)."""
_AT_FETCH = "to be given when the transcript is fetched (GET /v1/jobs/{id}/transcript?format=srt)"


def parse_cue_limits(
    fields: Fields, subtitles: bool, *, needs: str, highlight: bool = True
) -> CueLimits | None:
    """The cue-shaping fields (each name → its values, as text) as :class:`CueLimits`, the
    defaults for those not given; None when the answer is not subtitles (``subtitles``
    false), where any shaping field is :class:`InvalidRequest` naming it (it would change
    nothing), as is ``highlight_words`` where there is no highlighting (``highlight``)."""
    given = _Fields(fields)
    present = [name for name in SHAPING if given.get(name)]
    if not subtitles:
        if present:
            message = f"{present[0]} shapes subtitle cues: it needs {needs}"
            raise InvalidRequest(message, param=present[0])
        return None
    if not highlight and _flag(given.get("highlight_words"), "highlight_words"):
        raise InvalidRequest(f"highlight_words needs {needs}", param="highlight_words")
    defaults = CueLimits()
    words = given.get("max_words_per_cue")
    return CueLimits(
        max_line_width=_limit(given, "max_line_width", defaults.max_line_width),
        max_line_count=_limit(given, "max_line_count", defaults.max_line_count),
        max_words_per_cue=_limit(given, "max_words_per_cue", 0) if words else None,
        max_cue_seconds=_number(
            given.get("max_cue_seconds"),
            "max_cue_seconds",
            *LIMITS["max_cue_seconds"],
            defaults.max_cue_seconds,
        ),
        highlight_words=_flag(given.get("highlight_words"), "highlight_words"),
    )


def _limit(given: _Fields, name: str, default: int) -> int:
    low, high = LIMITS[name]
    return _integer(given.get(name), name, int(low), int(high), default)


def parse_callback(value: str | None, param: str = "callback_url") -> str | None:
    """A well-formed callback URL (see :func:`asrserve.outbound.parse`), or None if not given;
    :class:`InvalidRequest` ``invalid_callback_url`` naming ``param`` otherwise."""
    if not value:
        return None
    try:
        outbound.parse(value)
    except outbound.InvalidUrl as exc:
        message = f"{param} is not a usable URL: {exc}"
        raise InvalidRequest(message, param=param, code="invalid_callback_url") from None
    return value


def keep_alive_field(value: str | None) -> float | None:
    """Seconds or a duration (``5m``), ``-1`` forever (settings/keep_alive.py); None if
    not given."""
    if value is None or value == "":
        return None
    try:
        return parse_keep_alive(value)
    except ValueError as exc:
        raise InvalidRequest(str(exc), param="keep_alive") from None


def _logprobs(fields: Fields, fmt: ResponseFormat) -> bool:
    """``include[]=logprobs``: only with ``response_format=json`` (as OpenAI allows it), the
    one format that carries them."""
    asked = openai_params.logprobs(fields)
    if asked and fmt is not ResponseFormat.JSON:
        raise InvalidRequest(
            "include[]=logprobs requires response_format=json", param=openai_params.INCLUDE
        )
    return asked


def _beam_size(value: str | None, model: ModelInfo, *, logprobs: bool) -> int:
    """The beam; 1 (greedy) with logprobs: CTranslate2 reports each step's distribution for
    a greedy or sampled decode only, so a wider beam cannot give them."""
    if not logprobs:
        return _integer(value, "beam_size", 1, 20, model.default_beam_size)
    beam = _integer(value, "beam_size", 1, 20, 1)
    if beam != 1:
        raise InvalidRequest(
            "include[]=logprobs decodes greedily: beam_size must be 1 (or left out)",
            param="beam_size",
        )
    return beam


def _flag(value: str | None, name: str) -> bool:
    """A boolean form field: ``true``/``false`` (or 1/0); absent or empty is false."""
    if not value:
        return False
    lowered = value.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise InvalidRequest(f"{name} must be true or false", param=name)


def _prompt(value: str | None) -> str | None:
    if value and len(value) > MAX_PROMPT_CHARS:
        message = (
            f"prompt is at most {MAX_PROMPT_CHARS} characters (Whisper uses only the last 223"
            " tokens of a prompt, about 800 characters)"
        )
        raise InvalidRequest(message, param="prompt", code="prompt_too_long")
    return value or None


def _diarization(fmt: ResponseFormat, task: Task, given: _Fields) -> Diarization | None:
    """Speakers, for ``diarized_json`` (a transcription's format only, as OpenAI's), within
    the ``min_speakers`` and ``max_speakers`` hints if given (whisper-asr-webservice's)."""
    hints = {name: given.get(name) for name in ("min_speakers", "max_speakers")}
    known = known_speakers(given.fields, fmt is ResponseFormat.DIARIZED_JSON)
    if fmt is not ResponseFormat.DIARIZED_JSON:
        for name, value in hints.items():
            if value is not None:
                raise InvalidRequest(
                    f"{name} is for diarization (response_format=diarized_json)", param=name
                )
        return None
    if task is not Task.TRANSCRIBE:
        raise InvalidRequest(
            f"response_format=diarized_json is for transcriptions, not a {task.value}",
            param="response_format",
        )
    low = _integer(hints["min_speakers"], "min_speakers", 1, MAX_SPEAKERS, 1)
    high = _integer(hints["max_speakers"], "max_speakers", 1, MAX_SPEAKERS, MAX_SPEAKERS)
    if low > high:
        raise InvalidRequest(
            f"min_speakers ({low}) is more than max_speakers ({high})", param="min_speakers"
        )
    return Diarization(min_speakers=low, max_speakers=high, known=known)


def _check_task(task: Task, model: ModelInfo) -> None:
    if task is Task.TRANSLATE and not model.multilingual:
        raise InvalidRequest(
            f"model '{model.id}' is English-only and cannot translate; use a multilingual model",
            param="model",
            code="translation_unsupported",
        )
    if task is Task.DETECT and not model.multilingual:
        raise InvalidRequest(
            f"model '{model.id}' is English-only and cannot tell languages apart; use a"
            " multilingual model",
            param="model",
            code="detection_unsupported",
        )


def _response_format(value: str | None) -> ResponseFormat:
    try:
        return ResponseFormat(value or "json")
    except ValueError:
        allowed = ", ".join(f.value for f in ResponseFormat)
        raise InvalidRequest(
            f"response_format must be one of {allowed}", param="response_format"
        ) from None


def _granularities(given: _Fields) -> set[str]:
    values = set(given.fields.get("timestamp_granularities[]", []))
    values |= set(given.fields.get("timestamp_granularities", []))
    unknown = values - GRANULARITIES
    if unknown:
        raise InvalidRequest(
            f"unknown timestamp granularity: {', '.join(sorted(unknown))}",
            param="timestamp_granularities[]",
        )
    return values


def _language(value: str | None, model: ModelInfo, rule: LanguageRule, task: Task) -> str | None:
    """The request's language: the one given, else the key's default (or its only language);
    None: detected (among the key's languages, if it has a list)."""
    code = _known(value) if value else None
    if code is not None and not rule.permits(code):
        raise InvalidRequest(
            f"language '{code}' is not allowed for this API key: it allows only"
            f" {', '.join(rule.allowed)}",
            param="language",
            code="language_not_allowed",
        )
    if not model.multilingual and not rule.permits("en"):
        raise InvalidRequest(
            f"model '{model.id}' transcribes English only, and this API key allows only"
            f" {', '.join(rule.allowed)}: name a multilingual model",
            param="model",
            code="unsupported_language",
        )
    if code is None and task is not Task.DETECT:
        code = rule.assumed
    if not model.multilingual and code not in (None, "en"):
        key = "" if value else f" (the language of this API key's requests is '{code}')"
        raise InvalidRequest(
            f"model '{model.id}' transcribes English only{key}",
            param="language" if value else "model",
            code="unsupported_language",
        )
    return code


def _known(value: str) -> str:
    from faster_whisper.tokenizer import _LANGUAGE_CODES  # Whisper's languages (pinned)

    code = value.strip().lower()
    if code not in _LANGUAGE_CODES:
        raise InvalidRequest(
            f"unknown language {value[:20]!r}: use an ISO-639-1 code such as 'en'",
            param="language",
        )
    return code


def _number(value: str | None, name: str, low: float, high: float, default: float) -> float:
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise InvalidRequest(f"{name} must be a number", param=name) from None
    if not low <= number <= high:
        raise InvalidRequest(f"{name} must be between {low:g} and {high:g}", param=name)
    return number


def _integer(value: str | None, name: str, low: int, high: int, default: int) -> int:
    number = _number(value, name, low, high, default)
    if not float(number).is_integer():
        raise InvalidRequest(f"{name} must be a whole number", param=name)
    return int(number)


def _surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def lone_surrogate(value: object, path: str = "") -> str | None:
    """Where a decoded JSON value holds a string with a lone surrogate (legal JSON:
    ``"\\ud800"``, but no UTF-8 can carry it, so storing or answering it fails later): the
    dotted path of the first such field ("" for the value itself), or None. A key that holds
    one is named by its escape (``metadata.\\ud83d``), so the path itself can be answered."""
    if isinstance(value, str):
        return path if _surrogate(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            name = str(key).encode("utf-8", "backslashreplace").decode("utf-8")
            where = f"{path}.{name}" if path else name
            if name != str(key):  # the key itself: named as its escape, which UTF-8 carries
                return where
            found = lone_surrogate(item, where)
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = lone_surrogate(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None
