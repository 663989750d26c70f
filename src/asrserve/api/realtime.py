"""``GET /v1/realtime?intent=transcription``: live transcription over a WebSocket, in the
subset of OpenAI's realtime protocol a live-caption client needs (see docs/live.md), in its
GA shape or its beta one.

Client events: ``session.update`` (GA) or ``transcription_session.update`` (beta),
``input_audio_buffer.append`` (base64 audio), ``input_audio_buffer.commit`` and
``input_audio_buffer.clear``. The session's own events answer in the shape the client spoke:
the first one, before it has, in the beta shape if it sent the header ``OpenAI-Beta:
realtime=v1`` or the subprotocol ``openai-beta.realtime-v1`` (OpenAI's beta clients do), else
in the GA shape, as OpenAI's API does. Every server event gets an ``event_id``. A client's
mistake is an ``error`` event; what it cannot go on from (garbage, audio faster than real
time, a buffer never committed, an exhausted quota) ends the session after the error, with
close code 1008. The key goes in the ``Authorization``
header or as the subprotocol ``openai-insecure-api-key.<key>``, as OpenAI's clients send it.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import itertools
import json
import logging
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from asrserve.api.deps import ApiContext
from asrserve.auth import quota
from asrserve.auth.principal import Principal
from asrserve.errors import STATUS_OF_KIND, AsrError, ErrorKind
from asrserve.live import beta, ga
from asrserve.live.errors import LiveError, LiveUnavailable, error_event
from asrserve.live.session import LiveSession

log = logging.getLogger(__name__)
router = APIRouter()

KEY_PROTOCOL = "openai-insecure-api-key."
BETA_PROTOCOL = "openai-beta.realtime-v1"
POLICY_VIOLATION = 1008
TRY_AGAIN_LATER = 1013
# the client's own mistakes, which it can mend in the same session: the kinds below "not now"
RECOVERABLE = frozenset(
    kind
    for kind, status in STATUS_OF_KIND.items()
    if status < STATUS_OF_KIND[ErrorKind.RATE_LIMITED]
)


class _Ended(Exception):
    """The session is over: the error that ended it has been sent."""


@dataclass
class _Client:
    beta: bool  # speaks OpenAI's beta realtime protocol (else the GA one)


@router.websocket("/v1/realtime")
async def realtime(websocket: WebSocket, intent: str | None = None) -> None:
    """Live transcription over a WebSocket (``?intent=transcription``), in OpenAI's realtime
    transcription events, GA (``session.update`` with ``session.type: "transcription"``, what
    ``openai``'s ``client.realtime.connect()`` speaks) or beta
    (``transcription_session.update``, ``OpenAI-Beta: realtime=v1``), each answered in its own
    shape. Audio comes in as it is spoken (base64 PCM16 at 24 kHz as OpenAI's clients send
    it, or 16 kHz; G.711 ``audio/pcmu``/``audio/pcma`` at 8 kHz from telephony); turns are
    cut by server VAD (a turn past ``ASRSERVE_LIVE_MAX_TURN_S``, 15 s, at its best pause) or
    committed by the client (``input_audio_buffer.committed``, ``.cleared``); interim
    ``...input_audio_transcription.delta`` while a turn is open (a word sent is never taken
    back), ``...completed`` when it ends and ``...failed`` for a turn that cannot be decoded
    (the session goes on). Per session: ``model``, ``language``, ``prompt``, and ``task:
    "translate"`` (English captions of other languages, a multilingual model);
    ``noise_reduction`` is accepted and shown as ignored; ``include:
    ["item.input_audio_transcription.logprobs"]`` puts the final decode's token ``logprobs``
    on each ``completed``. Many sessions' windows share forward passes with each other and
    with file requests, ahead of them (docs/live.md)."""
    ctx: ApiContext = websocket.app.state.context
    offered = websocket.scope.get("subprotocols") or []
    await websocket.accept(subprotocol="realtime" if "realtime" in offered else None)
    ids = itertools.count(1)
    beta_header = websocket.headers.get("openai-beta", "").strip().lower() == "realtime=v1"
    client = _Client(beta=beta_header or BETA_PROTOCOL in offered)
    try:
        principal = await _principal(ctx, websocket, offered)
        if intent != "transcription":
            raise LiveError(
                "only ?intent=transcription is served here", code="invalid_intent", fatal=True
            )
        if ctx.catalog is None:
            raise LiveUnavailable("the model is still loading", code="model_loading")
        config = beta.default_config(ctx.catalog, principal.languages)

        async def charge(seconds: float) -> None:
            await quota.charge(ctx.service.keys, principal, seconds)

        tenant = principal.key_id or ""  # its API key's share of the devices
        holder = _holder(websocket, principal)
        async with ctx.live.session(config, charge, holder, tenant) as session:
            await _send(websocket, ids, _session_event(session, client, "created"))
            await _serve(ctx, websocket, session, client, ids, principal)
    except _Ended:
        return
    except WebSocketDisconnect:
        return
    except AsrError as exc:  # before the session began: refused
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):
            await _send(websocket, ids, error_event(exc))
            code = TRY_AGAIN_LATER if isinstance(exc, LiveUnavailable) else POLICY_VIOLATION
            await websocket.close(code)


async def _principal(ctx: ApiContext, websocket: WebSocket, offered: list[str]) -> Principal:
    """The caller, by the ``Authorization`` header or the key subprotocol."""
    header = websocket.headers.get("authorization", "")
    token = next((p.removeprefix(KEY_PROTOCOL) for p in offered if p.startswith(KEY_PROTOCOL)), "")
    try:
        return await ctx.authenticate(header or f"Bearer {token}")
    except AsrError as exc:  # no key, past its rate
        await _send(websocket, itertools.count(1), {"type": "error", **exc.body()})
        await websocket.close(POLICY_VIOLATION)
        raise _Ended from None


async def _serve(
    ctx: ApiContext,
    websocket: WebSocket,
    session: LiveSession,
    client: _Client,
    ids: itertools.count[int],
    principal: Principal,
) -> None:
    """Read client events and act on them while another task sends the session's events;
    a fatal error is sent after every event before it, then the socket is closed."""
    sender = asyncio.create_task(_pump(websocket, session, ids))
    idle_s = ctx.service.settings.live_idle_timeout_s
    try:
        while True:
            try:
                message = await _receive(websocket, idle_s)
                await _handle(ctx, session, client, message, principal)
            except LiveError as exc:
                session.events.put_nowait(error_event(exc))
                if exc.fatal:
                    break
            except AsrError as exc:  # an update's bad field, a quota used up
                session.events.put_nowait(error_event(exc))
                if not _recoverable(exc):
                    break
        session.events.put_nowait({"type": "session.closing"})
        await sender
        await websocket.close(POLICY_VIOLATION)
        raise _Ended
    finally:
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, WebSocketDisconnect, RuntimeError):
            await sender


def _holder(websocket: WebSocket, principal: Principal) -> str:
    """Whose share of the live sessions this one counts against: its API key, or with auth
    off its client's address."""
    if principal.key_id is not None:
        return f"key:{principal.key_id}"
    return f"addr:{websocket.client.host}" if websocket.client is not None else ""


async def _receive(websocket: WebSocket, idle_s: float) -> Any:
    """The next client message; a client silent for ``idle_s`` ends its session."""
    try:
        return await asyncio.wait_for(websocket.receive(), idle_s)
    except TimeoutError:
        message = f"no client event for {idle_s:g} s: the session is closed"
        raise LiveError(message, code="session_idle_timeout", fatal=True) from None


async def _handle(
    ctx: ApiContext, session: LiveSession, client: _Client, message: Any, principal: Principal
) -> None:
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    text = message.get("text")
    if text is None:
        raise LiveError("send client events as JSON text frames", code="invalid_event", fatal=True)
    try:
        event = json.loads(text)
    except ValueError:
        raise LiveError("a client event is not JSON", code="invalid_json", fatal=True) from None
    except RecursionError:  # legal JSON nested deeper than the parser goes
        message = "a client event is nested too deeply"
        raise LiveError(message, code="invalid_json", fatal=True) from None
    if not isinstance(event, dict):
        raise LiveError("a client event is a JSON object", code="invalid_event", fatal=True)
    kind = event.get("type")
    if kind == "input_audio_buffer.append":
        await session.append(_audio(event.get("audio")))
    elif kind == "input_audio_buffer.commit":
        await session.commit()
    elif kind == "input_audio_buffer.clear":
        session.clear()
    elif kind in ("transcription_session.update", "session.update"):
        assert ctx.catalog is not None
        client.beta = kind == "transcription_session.update"
        parse = beta.updated if client.beta else ga.updated
        new = parse(session.config, event.get("session"), ctx.catalog, principal.languages)
        session.configure(new)
        session.events.put_nowait(_session_event(session, client, "updated"))
    else:
        shown = str(kind)[:64]
        raise LiveError(f"unknown client event type {shown!r}", code="unknown_event", param="type")


def _audio(value: object) -> bytes:
    if not isinstance(value, str):
        raise LiveError("append carries base64 audio", code="invalid_audio", fatal=True)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise LiveError("the audio is not base64", code="invalid_audio", fatal=True) from None


async def _pump(websocket: WebSocket, session: LiveSession, ids: itertools.count[int]) -> None:
    while True:
        event = await session.events.get()
        if event["type"] == "session.closing":
            return
        await _send(websocket, ids, event)


async def _send(websocket: WebSocket, ids: itertools.count[int], event: dict[str, Any]) -> None:
    await websocket.send_text(json.dumps({"event_id": f"event_{next(ids)}", **event}))


def _session_event(session: LiveSession, client: _Client, what: str) -> dict[str, Any]:
    """``session.created``/``.updated`` (GA) or ``transcription_session.…`` (beta)."""
    if client.beta:
        view = beta.view(session.id, session.config)
        return {"type": f"transcription_session.{what}", "session": view}
    return {"type": f"session.{what}", "session": ga.view(session.id, session.config)}


def _recoverable(exc: AsrError) -> bool:
    """A bad value in an update is; a used-up quota or rate is not."""
    return exc.kind in RECOVERABLE
