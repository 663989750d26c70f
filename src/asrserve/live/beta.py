"""A live session's settings as OpenAI's beta realtime API gives them
(``transcription_session.update``'s ``session``) and shows them
(``transcription_session.created`` and ``.updated``), and the fields both protocols share
(the GA shape is in :mod:`asrserve.live.ga`). A field left out keeps its value; an object
given replaces the one before.

- ``input_audio_format``: ``"pcm16"`` (24 kHz mono, OpenAI's), ``"g711_ulaw"``,
  ``"g711_alaw"`` (8 kHz), or the GA objects ``{"type": "audio/pcm", "rate": 16000 |
  24000}``, ``{"type": "audio/pcmu"}``, ``{"type": "audio/pcma"}``.
- ``input_audio_transcription``: ``model``, ``language``, ``languages``, ``prompt``,
  ``keywords``, checked as the HTTP form's fields are, and ours, ``task``:
  ``"transcribe"`` or ``"translate"`` (English text of any language; a multilingual model).
- ``turn_detection``: ``{"type": "server_vad", "threshold", "prefix_padding_ms",
  "silence_duration_ms"}``, or null (the client commits).
- ``input_audio_noise_reduction``: ``{"type": "near_field" | "far_field"}`` or null:
  accepted and shown, not applied (listed in the session's ``ignored``).
- ``include``: ``["item.input_audio_transcription.logprobs"]`` or ``[]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest
from asrserve.languages import ANY_LANGUAGE, LanguageRule
from asrserve.live.audio import G711_RATE, INPUT_RATES, PCM16, PCMA, PCMU
from asrserve.live.session import SessionConfig
from asrserve.live.turns import TurnDetection
from asrserve.requests import parse_request
from asrserve.vocabulary import Task, TranscriptionOptions

OPENAI_RATE = 24000  # "pcm16"
LOGPROBS = "item.input_audio_transcription.logprobs"
NOISE_TYPES = ("near_field", "far_field")
TASKS = {"transcribe": Task.TRANSCRIBE, "translate": Task.TRANSLATE}
# beta's names of the formats; the GA objects are accepted by both
BETA_FORMATS = {"pcm16": (OPENAI_RATE, PCM16), "g711_ulaw": (G711_RATE, PCMU)}
BETA_FORMATS["g711_alaw"] = (G711_RATE, PCMA)
GA_TYPES = {"audio/pcmu": PCMU, "audio/pcma": PCMA}


def default_config(catalog: Catalog, languages: LanguageRule = ANY_LANGUAGE) -> SessionConfig:
    return SessionConfig(options=parse_request({}, catalog, languages=languages).options)


def updated(
    config: SessionConfig,
    session: object,
    catalog: Catalog,
    languages: LanguageRule = ANY_LANGUAGE,
) -> SessionConfig:
    """``config`` with what ``session`` (the beta update's object) sets, within the
    ``languages`` the caller's key allows; InvalidRequest naming the field at fault
    otherwise."""
    if not isinstance(session, Mapping):
        raise InvalidRequest("session must be an object", param="session")
    changes: dict[str, Any] = {}
    if "input_audio_format" in session:
        rate, encoding = audio_format(session["input_audio_format"], "session.input_audio_format")
        changes.update(input_rate=rate, input_encoding=encoding)
    if "input_audio_transcription" in session:
        field = session["input_audio_transcription"]
        param = "session.input_audio_transcription"
        changes["options"] = transcription(field, catalog, param, languages)
    if "turn_detection" in session:
        changes["turn_detection"] = detection(session["turn_detection"], "session.turn_detection")
    if "input_audio_noise_reduction" in session:
        field = session["input_audio_noise_reduction"]
        param = "session.input_audio_noise_reduction"
        changes["noise_reduction"] = noise_reduction(field, param)
    if "include" in session:
        changes["logprobs"] = include(session["include"])
    return dataclasses.replace(config, **changes)


def view(session_id: str, config: SessionConfig) -> dict[str, Any]:
    """The session in the beta shape."""
    audio_format: object = next(
        (
            name
            for name, (rate, encoding) in BETA_FORMATS.items()
            if (config.input_rate, config.input_encoding) == (rate, encoding)
        ),
        {"type": "audio/pcm", "rate": config.input_rate},
    )
    return {
        "id": session_id,
        "object": "realtime.transcription_session",
        "input_audio_format": audio_format,
        "input_audio_transcription": transcription_view(config.options),
        "turn_detection": detection_view(config.turn_detection),
        "input_audio_noise_reduction": config.noise_reduction,
        "include": include_view(config),
        "ignored": ["input_audio_noise_reduction"] if config.noise_reduction else [],
    }


def transcription_view(options: TranscriptionOptions) -> dict[str, Any]:
    return {
        "model": options.model,
        "language": options.language,
        "prompt": options.prompt or "",
        "keywords": list(options.keywords),
        "task": options.task.value,  # ours
    }


def detection_view(detection: TurnDetection | None) -> dict[str, Any] | None:
    if detection is None:
        return None
    return {
        "type": "server_vad",
        "threshold": detection.threshold,
        "prefix_padding_ms": detection.prefix_padding_ms,
        "silence_duration_ms": detection.silence_duration_ms,
    }


def include_view(config: SessionConfig) -> list[str]:
    return [LOGPROBS] if config.logprobs else []


def audio_format(value: object, param: str) -> tuple[int, str]:
    """(rate, encoding) of a format, by its beta name or as a GA object."""
    if isinstance(value, str) and value in BETA_FORMATS:
        return BETA_FORMATS[value]
    if isinstance(value, Mapping):
        kind = value.get("type")
        if kind in GA_TYPES and value.get("rate", G711_RATE) == G711_RATE:
            return G711_RATE, GA_TYPES[kind]
        rate = value.get("rate", OPENAI_RATE)
        if kind in ("audio/pcm", "pcm16") and rate in INPUT_RATES and not isinstance(rate, bool):
            return int(rate), PCM16
    raise InvalidRequest(
        'the input audio format is "pcm16" (24 kHz), "g711_ulaw", "g711_alaw",'
        ' {"type": "audio/pcm", "rate": 24000 | 16000}, {"type": "audio/pcmu"}'
        ' or {"type": "audio/pcma"}',
        param=param,
        code="invalid_audio_format",
    )


def transcription(
    value: object, catalog: Catalog, param: str, languages: LanguageRule = ANY_LANGUAGE
) -> TranscriptionOptions:
    """The decoding options of a transcription object, within the ``languages`` the
    caller's key allows; its ``task`` is ours."""
    if not isinstance(value, Mapping):
        raise InvalidRequest("the transcription settings are an object", param=param)
    task = TASKS.get(value.get("task") or "transcribe")
    if task is None:
        raise InvalidRequest('task is "transcribe" or "translate"', param=f"{param}.task")
    fields = {
        name: [str(value[name])]
        for name in ("model", "language", "prompt")
        if value.get(name) is not None
    }
    among = value.get("languages")
    if among is not None:
        if not isinstance(among, list) or not all(isinstance(code, str) for code in among):
            message = "languages is a list of language codes (ISO-639-1)"
            raise InvalidRequest(message, param=f"{param}.languages")
        fields["languages"] = among
    terms = value.get("keywords")
    if terms is not None:
        if not isinstance(terms, list) or not all(isinstance(term, str) for term in terms):
            raise InvalidRequest("keywords is a list of terms", param=f"{param}.keywords")
        fields["keywords"] = terms
    model = catalog.resolve(fields.get("model", [None])[-1], languages=languages)
    if task is Task.TRANSLATE and not model.multilingual:
        raise InvalidRequest(
            f"model '{model.id}' is English-only and cannot translate; use a multilingual model",
            param=f"{param}.task",
            code="translation_unsupported",
        )
    return parse_request(fields, catalog, task=task, languages=languages).options


def detection(value: object, param: str) -> TurnDetection | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or value.get("type", "server_vad") != "server_vad":
        raise InvalidRequest(
            'turn_detection must be null or {"type": "server_vad", ...}',
            param=param,
            code="unsupported_turn_detection",
        )
    if value.get("idle_timeout_ms") is not None:
        raise InvalidRequest(
            "idle_timeout_ms is not supported (a transcription session has no responses)",
            param=f"{param}.idle_timeout_ms",
            code="unsupported_turn_detection",
        )
    default = TurnDetection()
    threshold = _bounded(value, "threshold", default.threshold, (0.0, 1.0), param)
    prefix = _bounded(value, "prefix_padding_ms", default.prefix_padding_ms, (0, 5000), param)
    silence = _bounded(
        value, "silence_duration_ms", default.silence_duration_ms, (100, 10000), param
    )
    return TurnDetection(float(threshold), int(prefix), int(silence))


def noise_reduction(value: object, param: str) -> dict[str, Any] | None:
    """The setting as given (it is shown, never applied), or InvalidRequest if malformed."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or value.get("type") not in (None, *NOISE_TYPES):
        raise InvalidRequest(
            'noise_reduction is null or {"type": "near_field" | "far_field"}', param=param
        )
    strength = value.get("strength")
    if strength is not None and (
        isinstance(strength, bool) or not isinstance(strength, int | float) or strength < 0
    ):
        raise InvalidRequest(
            "noise_reduction.strength is a number of at least 0", param=f"{param}.strength"
        )
    return {name: value[name] for name in ("type", "strength") if name in value}


def include(value: object) -> bool:
    """Whether ``include`` asks for the tokens' log probabilities."""
    if value is None:
        return False
    if not isinstance(value, list) or any(item != LOGPROBS for item in value):
        raise InvalidRequest(
            f'include is a list of "{LOGPROBS}" (the only extra output there is)',
            param="session.include",
        )
    return bool(value)


def _bounded(
    value: Mapping[str, Any],
    name: str,
    default: float,
    bounds: tuple[float, float],
    param: str,
) -> float:
    low, high = bounds
    given = value.get(name, default)
    if given is None:
        return default
    if isinstance(given, bool) or not isinstance(given, int | float) or not low <= given <= high:
        raise InvalidRequest(
            f"turn_detection.{name} must be a number from {low:g} to {high:g}",
            param=f"{param}.{name}",
        )
    return float(given)
