"""A live session's settings in OpenAI's GA realtime shape: ``session.update``'s ``session``

    {"type": "transcription",
     "audio": {"input": {"format", "transcription", "noise_reduction", "turn_detection"}},
     "include": [...]}

shown in ``session.created`` and ``session.updated``. Each field means what its beta
counterpart does (:mod:`asrserve.live.beta`); a field left out keeps its value.
``transcription``'s ``delay`` (other OpenAI models') is refused by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest
from asrserve.languages import ANY_LANGUAGE, LanguageRule
from asrserve.live import beta as shared
from asrserve.live.audio import PCM16, PCMA
from asrserve.live.session import SessionConfig

INPUT = "session.audio.input"
UNSUPPORTED = ("delay",)


def updated(
    config: SessionConfig,
    session: object,
    catalog: Catalog,
    languages: LanguageRule = ANY_LANGUAGE,
) -> SessionConfig:
    """``config`` with what ``session`` (a GA ``session.update``'s object) sets, within the
    ``languages`` the caller's key allows; InvalidRequest naming the field at fault
    otherwise."""
    if not isinstance(session, Mapping):
        raise InvalidRequest("session must be an object", param="session")
    if session.get("type") != "transcription":
        raise InvalidRequest(
            'this endpoint serves transcription sessions: session.type is "transcription"',
            param="session.type",
            code="invalid_session_type",
        )
    changes: dict[str, Any] = {}
    audio = session.get("audio")
    if audio is not None:
        if not isinstance(audio, Mapping) or audio.get("output") is not None:
            raise InvalidRequest(
                "session.audio is an object with input only (transcription has no output)",
                param="session.audio",
            )
        given = audio.get("input")
        if given is not None:
            changes.update(_input(given, catalog, languages))
    if "include" in session:
        changes["logprobs"] = shared.include(session["include"])
    return dataclasses.replace(config, **changes)


def view(session_id: str, config: SessionConfig) -> dict[str, Any]:
    """The session in the GA shape (the ``session`` of ``session.created``/``.updated``)."""
    if config.input_encoding == PCM16:
        audio_format: dict[str, Any] = {"type": "audio/pcm", "rate": config.input_rate}
    else:
        audio_format = {"type": "audio/pcma" if config.input_encoding == PCMA else "audio/pcmu"}
    return {
        "type": "transcription",
        "id": session_id,
        "object": "realtime.transcription_session",
        "audio": {
            "input": {
                "format": audio_format,
                "transcription": shared.transcription_view(config.options),
                "noise_reduction": config.noise_reduction,
                "turn_detection": shared.detection_view(config.turn_detection),
            }
        },
        "include": shared.include_view(config),
        "ignored": ["audio.input.noise_reduction"] if config.noise_reduction else [],
    }


def _input(given: object, catalog: Catalog, languages: LanguageRule) -> dict[str, Any]:
    if not isinstance(given, Mapping):
        raise InvalidRequest("session.audio.input is an object", param=INPUT)
    changes: dict[str, Any] = {}
    if "format" in given:
        rate, encoding = shared.audio_format(given["format"], f"{INPUT}.format")
        changes.update(input_rate=rate, input_encoding=encoding)
    if "transcription" in given:
        changes["options"] = _transcription(given["transcription"], catalog, languages)
    if "noise_reduction" in given:
        param = f"{INPUT}.noise_reduction"
        changes["noise_reduction"] = shared.noise_reduction(given["noise_reduction"], param)
    if "turn_detection" in given:
        param = f"{INPUT}.turn_detection"
        changes["turn_detection"] = shared.detection(given["turn_detection"], param)
    return changes


def _transcription(value: object, catalog: Catalog, languages: LanguageRule) -> Any:
    param = f"{INPUT}.transcription"
    if value is None:
        raise InvalidRequest(
            "a transcription session cannot turn its transcription off", param=param
        )
    if isinstance(value, Mapping):
        for name in UNSUPPORTED:
            if value.get(name) is not None:
                raise InvalidRequest(
                    f"transcription.{name} is not supported by Whisper models",
                    param=f"{param}.{name}",
                    code="unsupported_parameter",
                )
    return shared.transcription(value, catalog, param, languages)
