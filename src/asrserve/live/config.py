"""A live session's settings as OpenAI's realtime API gives them
(``transcription_session.update``'s ``session``) and shows them (``transcription_session.created``
and ``.updated``).

- ``input_audio_format``: ``"pcm16"`` (24 kHz mono, OpenAI's), or ``{"type": "audio/pcm",
  "rate": 16000 | 24000}``.
- ``input_audio_transcription``: ``model``, ``language``, ``prompt``, checked as the HTTP
  form's fields are.
- ``turn_detection``: ``{"type": "server_vad", "threshold", "prefix_padding_ms",
  "silence_duration_ms"}``, or null (the client commits).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asrserve.engine.catalog import Catalog
from asrserve.engine.languages import ANY_LANGUAGE, LanguageRule
from asrserve.errors import InvalidRequest
from asrserve.live.audio import INPUT_RATES
from asrserve.live.session import SessionConfig
from asrserve.live.turns import TurnDetection
from asrserve.requests import parse_request

OPENAI_RATE = 24000  # "pcm16"


def default_config(catalog: Catalog, languages: LanguageRule = ANY_LANGUAGE) -> SessionConfig:
    return SessionConfig(options=parse_request({}, catalog, languages=languages).options)


def updated(
    config: SessionConfig,
    session: object,
    catalog: Catalog,
    languages: LanguageRule = ANY_LANGUAGE,
) -> SessionConfig:
    """``config`` with what ``session`` (the update's object) sets, within the ``languages``
    the caller's key allows; InvalidRequest naming the field at fault otherwise."""
    if not isinstance(session, Mapping):
        raise InvalidRequest("session must be an object", param="session")
    rate = config.input_rate
    if "input_audio_format" in session:
        rate = _rate(session["input_audio_format"])
    options = config.options
    if "input_audio_transcription" in session:
        options = _options(session["input_audio_transcription"], catalog, languages)
    detection = config.turn_detection
    if "turn_detection" in session:
        detection = _detection(session["turn_detection"])
    return SessionConfig(options=options, turn_detection=detection, input_rate=rate)


def view(session_id: str, config: SessionConfig) -> dict[str, Any]:
    options, detection = config.options, config.turn_detection
    audio_format: object = (
        "pcm16" if config.input_rate == OPENAI_RATE else {"type": "audio/pcm", "rate": 16000}
    )
    return {
        "id": session_id,
        "object": "realtime.transcription_session",
        "input_audio_format": audio_format,
        "input_audio_transcription": {
            "model": options.model,
            "language": options.language,
            "prompt": options.prompt or "",
        },
        "turn_detection": None
        if detection is None
        else {
            "type": "server_vad",
            "threshold": detection.threshold,
            "prefix_padding_ms": detection.prefix_padding_ms,
            "silence_duration_ms": detection.silence_duration_ms,
        },
    }


def _rate(value: object) -> int:
    if value == "pcm16":
        return OPENAI_RATE
    if isinstance(value, Mapping) and value.get("type") in ("audio/pcm", "pcm16"):
        rate = value.get("rate", OPENAI_RATE)
        if rate in INPUT_RATES:
            return int(rate)
    raise InvalidRequest(
        'input_audio_format must be "pcm16" (24 kHz) or {"type": "audio/pcm", "rate": 16000}',
        param="session.input_audio_format",
        code="invalid_audio_format",
    )


def _options(value: object, catalog: Catalog, languages: LanguageRule) -> Any:
    if not isinstance(value, Mapping):
        raise InvalidRequest(
            "input_audio_transcription must be an object",
            param="session.input_audio_transcription",
        )
    fields = {
        name: [str(value[name])]
        for name in ("model", "language", "prompt")
        if value.get(name) is not None
    }
    return parse_request(fields, catalog, languages=languages).options


def _detection(value: object) -> TurnDetection | None:
    if value is None:
        return None
    param = "session.turn_detection"
    if not isinstance(value, Mapping) or value.get("type", "server_vad") != "server_vad":
        raise InvalidRequest(
            'turn_detection must be null or {"type": "server_vad", ...}',
            param=param,
            code="unsupported_turn_detection",
        )
    default = TurnDetection()
    threshold = _bounded(value, "threshold", default.threshold, 0.0, 1.0)
    prefix = _bounded(value, "prefix_padding_ms", default.prefix_padding_ms, 0, 5000)
    silence = _bounded(value, "silence_duration_ms", default.silence_duration_ms, 100, 10000)
    return TurnDetection(float(threshold), int(prefix), int(silence))


def _bounded(value: Mapping[str, Any], name: str, default: float, low: float, high: float) -> float:
    given = value.get(name, default)
    if given is None:
        return default
    if isinstance(given, bool) or not isinstance(given, int | float) or not low <= given <= high:
        raise InvalidRequest(
            f"turn_detection.{name} must be a number from {low:g} to {high:g}",
            param=f"session.turn_detection.{name}",
        )
    return float(given)
