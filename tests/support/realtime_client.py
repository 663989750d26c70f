"""OpenAI's realtime transcription as the official ``openai`` client speaks it to a real
server: a GA session, its updates, audio sent a little ahead of real time, and the events
read back, each validated against the client's own types (``realtime_types.py``)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import openai
from openai.resources.realtime.realtime import RealtimeConnection
from openai.types.realtime import (
    RealtimeTranscriptionSessionCreateRequestParam as TranscriptionSession,
)
from openai.types.websocket_connection_options import WebSocketConnectionOptions

from tests.support.realtime_types import ga_event
from tests.support.servers import Server

Event = dict[str, Any]
AHEAD_S = 5.0  # how far ahead of real time the audio is sent (the server allows 10 s)
TRANSCRIPTION = "conversation.item.input_audio_transcription"


@contextmanager
def connect(server: Server) -> Iterator[RealtimeConnection]:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
    # the openai client calls websockets' connect() outside a with block, which websockets
    # 17.1 warns about on the first recv; legacy=True is its way of asking for that
    options = cast(WebSocketConnectionOptions, {"legacy": True})
    query = {"intent": "transcription"}
    with client.realtime.connect(extra_query=query, websocket_connection_options=options) as ws:
        yield ws


def update(connection: RealtimeConnection, audio_input: Event, include: list[str]) -> None:
    """A GA ``session.update`` of the transcription session's ``audio.input`` (a cast:
    ``transcription.task`` is ours, not in the client's types)."""
    session = {"type": "transcription", "audio": {"input": audio_input}, "include": include}
    connection.session.update(session=cast(TranscriptionSession, session))


def receive(connection: RealtimeConnection) -> Event:
    """The next server event, after checking it is the GA client's type of its kind."""
    event: Event = json.loads(connection.recv_bytes())
    ga_event(event)
    return event


def until(connection: RealtimeConnection, kind: str) -> list[Event]:
    """Events up to and including the next one of ``kind``."""
    seen = [receive(connection)]
    while seen[-1]["type"] != kind:
        seen.append(receive(connection))
    return seen


def send_audio(connection: RealtimeConnection, audio: bytes, rate: int, width: int) -> None:
    """``audio`` in 200 ms appends, each sent :data:`AHEAD_S` before it would be spoken."""
    step = rate * width // 5
    start = time.monotonic()
    for at in range(0, len(audio), step):
        connection.input_audio_buffer.append(audio=base64.b64encode(audio[at : at + step]).decode())
        spoken = (at + step) / width / rate
        time.sleep(max(0.0, start + spoken - AHEAD_S - time.monotonic()))


def settle(connection: RealtimeConnection) -> list[Event]:
    """Every event until each turn committed so far has its completed or failed event: a
    clear goes in after the audio, and its ``cleared`` comes after the commits before it."""
    connection.input_audio_buffer.clear()
    seen = until(connection, "input_audio_buffer.cleared")
    ended = (f"{TRANSCRIPTION}.completed", f"{TRANSCRIPTION}.failed")

    def waiting() -> int:
        committed = sum(e["type"] == "input_audio_buffer.committed" for e in seen)
        return int(committed - sum(e["type"] in ended for e in seen))

    while waiting():
        seen.append(receive(connection))
    return seen
