"""Server events checked against the official ``openai`` client's pydantic types of the
realtime API, GA (``openai.types.realtime``) and beta (``openai.types.beta.realtime``): two
peers shipped these shapes wrong (speaches #533, vLLM #49116).

The beta types have no ``transcription_session.created``, and their
``transcription_session.updated`` requires a ``client_secret`` (which OpenAI sends only when a
session is made over REST, never over the WebSocket) and names OpenAI's models only: beta
session events are checked by the tests' own assertions, every other beta event here."""

from __future__ import annotations

from typing import Any, get_args

from openai import BaseModel
from openai.types.beta.realtime.realtime_server_event import (
    RealtimeServerEvent as BetaServerEvent,
)
from openai.types.realtime import RealtimeServerEvent


def _by_type(union: Any) -> dict[str, type[BaseModel]]:
    members = get_args(get_args(union)[0])  # Annotated[Union[...], discriminator]
    return {get_args(m.model_fields["type"].annotation)[0]: m for m in members}


GA = _by_type(RealtimeServerEvent)
BETA = _by_type(BetaServerEvent)
BETA_SESSION_EVENTS = ("transcription_session.created", "transcription_session.updated")


def ga_event(event: dict[str, Any]) -> BaseModel:
    """``event`` as the GA client's type of its ``type`` (pydantic raises if it is not one)."""
    return GA[event["type"]].model_validate(event)


def beta_event(event: dict[str, Any]) -> BaseModel | None:
    """``event`` as the beta client's type of its ``type``; None for the session events."""
    if event["type"] in BETA_SESSION_EVENTS:
        return None
    return BETA[event["type"]].model_validate(event)
