"""A Wyoming client for tests: the library's own ``AsyncTcpClient`` against the Wyoming
server of an app running in this process (``ASRSERVE_WYOMING_PORT=0``: a free port), an
utterance sent as Home Assistant sends one, and the events it gets back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
from starlette.testclient import TestClient
from wyoming.asr import Transcribe
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event

from asrserve.audio.decode import decode
from tests.support.inprocess import InProcess, in_process

HOST = "127.0.0.1"
READ_TIMEOUT_S = 60.0  # a bound on a broken server, not a timing claim
ENDS = ("transcript-stop", "error")


def pcm16(path: Path) -> bytes:
    """The file's audio as 16 kHz 16-bit mono, decoded by the project's decode."""
    samples = decode(path, max_seconds=600)
    return bytes((np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes())


def port_of(client: TestClient) -> int:
    port: int = client.app.state.wyoming.port  # type: ignore[attr-defined]
    return port


@contextlib.contextmanager
def wyoming_app(
    data: Path, env: Mapping[str, str] | None = None
) -> Iterator[tuple[InProcess, int]]:
    """The app with fake engines and its Wyoming server on a free loopback port."""
    with in_process(data, {"ASRSERVE_WYOMING_PORT": "0", **(env or {})}) as app:
        yield app, port_of(app.client)


def utterance(
    audio: bytes, rate: int = 16000, width: int = 2, channels: int = 1, samples: int = 1024
) -> list[Event]:
    """``audio-start``, the audio in chunks of ``samples`` samples, ``audio-stop``."""
    step = samples * width * channels
    chunks = [
        AudioChunk(rate=rate, width=width, channels=channels, audio=audio[i : i + step]).event()
        for i in range(0, len(audio), step)
    ]
    start = AudioStart(rate=rate, width=width, channels=channels).event()
    return [start, *chunks, AudioStop().event()]


async def answer(client: AsyncTcpClient) -> list[Event]:
    """The events the server sends up to ``transcript-stop`` or ``error``."""
    events: list[Event] = []
    while not events or events[-1].type not in ENDS:
        event = await client.read_event()
        assert event is not None, f"the connection closed after {[e.type for e in events]}"
        events.append(event)
    return events


async def ask(port: int, events: list[Event]) -> list[Event]:
    """``events`` sent on a new connection; the answer."""
    async with AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as client:
        for event in events:
            await client.write_event(event)
        return await answer(client)


def transcribed(
    port: int, audio: bytes, request: Transcribe | None = None, **fmt: int
) -> list[Event]:
    """``transcribe`` (default: nothing asked) then the utterance, on a new connection."""
    sent = [(request or Transcribe()).event(), *utterance(audio, **fmt)]
    return asyncio.run(ask(port, sent))


def kinds(events: list[Event]) -> list[str]:
    return [event.type for event in events]
