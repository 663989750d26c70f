"""A transcription request's options, validated: from field values (a multipart form's
fields, a Batch API line's body, a live session's settings, ``/asr``'s query) through the
request schema (``request_schema.py``), then together against the served models and the
caller's key, to :class:`TranscriptionRequest`, or :class:`InvalidRequest` naming the field
at fault."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from asrserve import openai_params
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import DIARIZE_ALIAS, Catalog
from asrserve.errors import InvalidRequest
from asrserve.formats import ResponseFormat
from asrserve.known_speakers import known_speakers
from asrserve.languages import ANY_LANGUAGE, LanguageRule
from asrserve.request_schema import CueForm, RequestForm
from asrserve.subtitles import LIMITS, CueLimits
from asrserve.vocabulary import MAX_SPEAKERS, Diarization, Task, TranscriptionOptions


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
    # OpenAI's diarizing model: audio longer than this needs a chunking_strategy
    chunking_past_s: float | None = None


DIARIZE_FORMATS = (ResponseFormat.JSON, ResponseFormat.TEXT, ResponseFormat.DIARIZED_JSON)
DIARIZE_CHUNKING_S = 30.0


def _diarize_model(form: RequestForm, fields: Fields) -> float | None:
    """``gpt-4o-transcribe-diarize``'s rules, as OpenAI's model takes its fields: no
    ``prompt``, no ``include[]=logprobs``, ``json``, ``text`` or ``diarized_json``; past
    ``DIARIZE_CHUNKING_S`` of audio, a ``chunking_strategy`` (:func:`check_chunking`, once
    the audio's length is known). The seconds past which it still needs one (None: another
    model, or one given)."""
    if form.model != DIARIZE_ALIAS:
        return None
    if form.prompt:
        raise InvalidRequest(f"{DIARIZE_ALIAS} takes no prompt", param="prompt")
    if form.include:
        raise InvalidRequest(f"{DIARIZE_ALIAS} gives no logprobs", param=openai_params.INCLUDE)
    if form.response_format not in DIARIZE_FORMATS:
        formats = ", ".join(f.value for f in DIARIZE_FORMATS)
        message = f"{DIARIZE_ALIAS} answers {formats}, not {form.response_format.value}"
        raise InvalidRequest(message, param="response_format")
    chunking = openai_params.CHUNKING
    given = any(
        (name == chunking or name.startswith(f"{chunking}[")) and any(v.strip() for v in values)
        for name, values in fields.items()
    )
    return None if given else DIARIZE_CHUNKING_S


def check_chunking(request: TranscriptionRequest, seconds: float | None) -> None:
    """:class:`InvalidRequest` naming ``chunking_strategy`` if the request's model needs one
    for audio of ``seconds`` (None: not known before decoding) and it gives none."""
    limit = request.chunking_past_s
    if limit is None or seconds is None or seconds <= limit:
        return
    raise InvalidRequest(
        f"{DIARIZE_ALIAS} needs a chunking_strategy for audio over {limit:g} s (this is"
        f" {seconds:.1f} s): send chunking_strategy=auto",
        param="chunking_strategy",
    )


Fields = Mapping[str, Sequence[str]]


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
    each through the request schema (:class:`asrserve.request_schema.RequestForm`), then
    together, against the served models and within the ``languages`` the caller's key
    allows. ``shaping``: the request may shape subtitle cues (false for an async job, whose
    cues are shaped when its transcript is fetched)."""
    for name, values in fields.items():
        if any(_surrogate(value) for value in values):
            raise InvalidRequest(
                f"{name} holds a lone surrogate (an unpaired \\ud800-\\udfff escape)",
                param=name,
                code="invalid_encoding",
            )
    form = RequestForm.of(fields)
    chunking_past_s = _diarize_model(form, fields)
    rule = _narrowed(languages, form)
    model = catalog.resolve(form.model, languages=rule)  # omitted: one that speaks them
    fmt = form.response_format
    diarization = _diarization(form, task, fields)  # a translation's format before its model
    _check_task(task, model)
    logprobs = _logprobs(form)
    words = "word" in form.timestamp_granularities
    subtitles = fmt in (ResponseFormat.SRT, ResponseFormat.VTT)
    needs = "response_format srt or vtt" if shaping else _AT_FETCH
    cues = cue_limits(form, subtitles and shaping, needs=needs)
    if words and fmt is not ResponseFormat.VERBOSE_JSON:
        raise InvalidRequest(
            "timestamp_granularities requires response_format=verbose_json",
            param="timestamp_granularities[]",
        )
    whose = "this request's languages[]" if form.languages else "this API key"
    language = _language(form.language, model, rule, task, whose)
    options = TranscriptionOptions(
        model=model.id,
        task=task,
        language=language,
        languages=rule.allowed if language is None and model.multilingual else (),
        prompt=form.prompt or None,
        keywords=tuple(form.keywords),
        temperature=form.temperature,
        # cues are cut at words' times, and words are what speakers are joined to
        word_timestamps=words or subtitles or diarization is not None,
        beam_size=_beam_size(form.beam_size, model, logprobs=logprobs),
        logprobs=logprobs,
        chunking=form.chunking_strategy,
        diarization=diarization,
    )
    return TranscriptionRequest(
        options=options,
        response_format=fmt,
        words=words,
        deadline_s=form.deadline_s,
        callback_url=form.callback_url if callback else None,
        stream=form.stream,
        keep_alive=form.keep_alive,
        cues=cues,
        chunking_past_s=chunking_past_s,
    )


SHAPING = (*LIMITS, "highlight_words")
"""The fields that shape subtitle cues (see :class:`asrserve.subtitles.CueLimits`)."""
_AT_FETCH = "to be given when the transcript is fetched (GET /v1/jobs/{id}/transcript?format=srt)"


def parse_cue_limits(
    fields: Fields, subtitles: bool, *, needs: str, highlight: bool = True
) -> CueLimits | None:
    """The cue-shaping fields (each name → its values, as text) as :class:`CueLimits` (see
    :func:`cue_limits`)."""
    return cue_limits(CueForm.of(fields), subtitles, needs=needs, highlight=highlight)


def cue_limits(
    form: CueForm, subtitles: bool, *, needs: str, highlight: bool = True
) -> CueLimits | None:
    """The cue limits given, the defaults for those not given; None when the answer is not
    subtitles (``subtitles`` false), where any shaping field is :class:`InvalidRequest`
    naming it (it would change nothing), as is ``highlight_words`` where there is no
    highlighting (``highlight``)."""
    present = [name for name in SHAPING if name in form.model_fields_set]
    if not subtitles:
        if present:
            message = f"{present[0]} shapes subtitle cues: it needs {needs}"
            raise InvalidRequest(message, param=present[0])
        return None
    if not highlight and form.highlight_words:
        raise InvalidRequest(f"highlight_words needs {needs}", param="highlight_words")
    defaults = CueLimits()
    return CueLimits(
        max_line_width=form.max_line_width or defaults.max_line_width,
        max_line_count=form.max_line_count or defaults.max_line_count,
        max_words_per_cue=form.max_words_per_cue,
        max_cue_seconds=form.max_cue_seconds or defaults.max_cue_seconds,
        highlight_words=form.highlight_words,
    )


def keep_alive_field(value: str | None) -> float | None:
    """Seconds or a duration (``5m``), ``-1`` forever (settings/keep_alive.py); None if
    not given."""
    return RequestForm.of({"keep_alive": [value]} if value is not None else {}).keep_alive


def _logprobs(form: RequestForm) -> bool:
    """``include[]=logprobs``: only with ``response_format=json`` (as OpenAI allows it), the
    one format that carries them."""
    asked = bool(form.include)
    if asked and form.response_format is not ResponseFormat.JSON:
        raise InvalidRequest(
            "include[]=logprobs requires response_format=json", param=openai_params.INCLUDE
        )
    return asked


def _beam_size(beam: int | None, model: ModelInfo, *, logprobs: bool) -> int:
    """The beam; 1 (greedy) with logprobs: CTranslate2 reports each step's distribution for
    a greedy or sampled decode only, so a wider beam cannot give them."""
    if not logprobs:
        return beam or model.default_beam_size
    if beam not in (None, 1):
        raise InvalidRequest(
            "include[]=logprobs decodes greedily: beam_size must be 1 (or left out)",
            param="beam_size",
        )
    return 1


def _diarization(form: RequestForm, task: Task, fields: Fields) -> Diarization | None:
    """Speakers, for ``diarized_json`` (a transcription's format only, as OpenAI's), within
    the ``min_speakers`` and ``max_speakers`` hints if given (whisper-asr-webservice's)."""
    diarized = form.response_format is ResponseFormat.DIARIZED_JSON
    known = known_speakers(fields, diarized)
    if not diarized:
        for name in ("min_speakers", "max_speakers"):
            if name in form.model_fields_set:
                raise InvalidRequest(
                    f"{name} is for diarization (response_format=diarized_json)", param=name
                )
        return None
    if task is not Task.TRANSCRIBE:
        raise InvalidRequest(
            f"response_format=diarized_json is for transcriptions, not a {task.value}",
            param="response_format",
        )
    low, high = form.min_speakers or 1, form.max_speakers or MAX_SPEAKERS
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


def _language(
    value: str | None, model: ModelInfo, rule: LanguageRule, task: Task, whose: str
) -> str | None:
    """The request's language: the one given, else the key's default (or its only language);
    None: detected (among the ``rule``'s languages, if it has a list: ``whose``)."""
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
            f"model '{model.id}' transcribes English only, and {whose} allows only"
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


def _narrowed(rule: LanguageRule, form: RequestForm) -> LanguageRule:
    """The key's languages narrowed to the request's ``languages[]`` (OpenAI's): the speech
    is detected among these only (one: it is that language)."""
    if not form.languages:
        return rule
    param = "languages[]"
    if form.language:
        raise InvalidRequest("give language or languages[], not both", param=param)
    codes = tuple(dict.fromkeys(_known(code, param) for code in form.languages))
    refused = [code for code in codes if not rule.permits(code)]
    if refused:
        raise InvalidRequest(
            f"language '{refused[0]}' is not allowed for this API key: it allows only"
            f" {', '.join(rule.allowed)}",
            param=param,
            code="language_not_allowed",
        )
    return LanguageRule(codes)


def _known(value: str, param: str = "language") -> str:
    from faster_whisper.tokenizer import _LANGUAGE_CODES  # Whisper's languages (pinned)

    code = value.strip().lower()
    if code not in _LANGUAGE_CODES:
        raise InvalidRequest(
            f"unknown language {value[:20]!r}: use an ISO-639-1 code such as 'en'",
            param=param,
        )
    return code


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
