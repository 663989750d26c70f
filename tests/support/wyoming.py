"""A Wyoming client for tests: the library's own ``AsyncTcpClient`` against the Wyoming
server of an app running in this process (``ASRSERVE_WYOMING_PORT=0``: a free port), an
utterance sent as Home Assistant sends one, and the events it gets back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

from starlette.testclient import TestClient
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Describe
from wyoming.ping import Ping, Pong

from asrserve.bench.corpus import Clip
from asrserve.bench.wyoming import pcm16 as bench_pcm16
from asrserve.engine.base import Engine
from asrserve.settings import Settings
from tests.support.fakes import FakeEngine
from tests.support.inprocess import InProcess, in_process

HOST = "127.0.0.1"
READ_TIMEOUT_S = 60.0  # a bound on a broken server, not a timing claim
ENDS = ("transcript-stop", "error")


def pcm16(path: Path) -> bytes:
    """The file's audio as 16 kHz 16-bit mono (up to 10 minutes of it)."""
    return bench_pcm16(path, max_seconds=600)


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


async def answered_in_turn(port: int, *audios: bytes) -> list[list[Event]]:
    """Each audio as an utterance (nothing asked), one after the other's answer, on one new
    connection; their answers."""
    answers = []
    async with AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as client:
        for audio in audios:
            for event in [Transcribe().event(), *utterance(audio)]:
                await client.write_event(event)
            answers.append(await answer(client))
    return answers


async def answered_then_pinged(
    port: int, audio: bytes, text: str = "open"
) -> tuple[list[Event], Event | None]:
    """An utterance (nothing asked) on a new connection, its answer, then a ``ping``
    carrying ``text`` on the same connection and what came back (None: it closed)."""
    async with AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as client:
        for event in [Transcribe().event(), *utterance(audio)]:
            await client.write_event(event)
        return await answer(client), await ping(client, text)


def kinds(events: list[Event]) -> list[str]:
    return [event.type for event in events]


async def ping(client: AsyncTcpClient, text: str) -> Event | None:
    """``ping`` carrying ``text``; the next event the server sends (None: it closed)."""
    await client.write_event(Ping(text=text).event())
    return await client.read_event()


def ponged(event: Event | None, text: str) -> bool:
    """The event is a ``pong`` carrying ``text``."""
    return event is not None and Pong.is_type(event.type) and Pong.from_event(event).text == text


STREAMED = ["transcript-start", "transcript-chunk", "transcript", "transcript-stop"]


def short(corpus: list[Clip], n: int) -> list[Clip]:
    """``n`` corpus clips of one window each, of distinct lengths."""
    clips = sorted({round(c.duration, 1): c for c in corpus if c.duration <= 20}.values(), key=str)
    assert len(clips) >= n
    return [clip for _, clip in zip(range(n), clips, strict=False)]


def text_of(events: list[Event]) -> str:
    (transcript,) = [e for e in events if Transcript.is_type(e.type)]
    return Transcript.from_event(transcript).text


def fakes(settings: Settings) -> list[dict[str, Engine]]:
    """An English-only fake tiny.en and a multilingual fake base whose detection says
    German."""
    base = FakeEngine(model_id="base", language="de")
    base.multilingual = True
    ENGINES[:] = [FakeEngine(model_id="tiny.en"), base]
    return [{engine.model_id: engine for engine in ENGINES}]


ENGINES: list[FakeEngine] = []  # the fakes of the app `fakes` made last

BOTH = {"ASRSERVE_MODELS": "tiny.en,base", "ASRSERVE_WYOMING_PORT": "0"}


async def describe(port: int) -> list[Event]:
    async with AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as client:
        await client.write_event(Describe().event())
        event = await client.read_event()
        assert event is not None
        return [event]
