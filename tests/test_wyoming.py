"""The Wyoming server (Home Assistant's speech-to-text) against the app in this process,
through the protocol library's own client: what it describes, how an utterance is
answered and streamed, what reaches the engine (language, terms, audio converted to
16 kHz mono), what bad input gets, that satellites speaking at once share forward passes,
and, on the real tiny.en, that JFK's sentence is heard."""

from __future__ import annotations

import asyncio
import io
import logging
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from wyoming.asr import Transcribe, Transcript, TranscriptChunk
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event, async_read_event, write_event
from wyoming.info import Describe, Info

from asrserve.bench.corpus import Clip
from asrserve.engine.base import Engine
from asrserve.engine.registry import load_engines
from asrserve.languages import LANGUAGE_NAMES
from asrserve.settings import Settings
from tests.support.fakes import FakeEngine
from tests.support.inprocess import in_process, served
from tests.support.keys import new_key_here
from tests.support.wait import wait_until
from tests.support.wyoming import (
    HOST,
    READ_TIMEOUT_S,
    answer,
    kinds,
    pcm16,
    port_of,
    transcribed,
    utterance,
    wyoming_app,
)

JFK = Path(__file__).parent / "data" / "jfk.flac"
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


ENGINES: list[FakeEngine] = []
BOTH = {"ASRSERVE_MODELS": "tiny.en,base", "ASRSERVE_WYOMING_PORT": "0"}


def test_describe_lists_each_served_model_and_its_languages(tmp_path: Path) -> None:
    with served(tmp_path / "data", BOTH, fakes) as http:
        (event,) = asyncio.run(_describe(port_of(http)))
    (program,) = Info.from_event(event).asr
    assert program.supports_transcript_streaming
    assert {model.name: model.languages for model in program.models} == {
        "tiny.en": ["en"],
        "base": list(LANGUAGE_NAMES),
    }


async def _describe(port: int) -> list[Event]:
    async with AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as client:
        await client.write_event(Describe().event())
        event = await client.read_event()
        assert event is not None
        return [event]


def test_each_utterance_is_streamed_then_answered_whole_on_one_connection(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """The fake engine decodes a window to its length: each utterance's own text comes as
    ``transcript-start``, a chunk, ``transcript`` and ``transcript-stop``, and the
    connection stays open for the next utterance."""
    first, second = short(corpus, 2)
    with wyoming_app(tmp_path / "data") as (_, port):
        answers = asyncio.run(_two_utterances(port, pcm16(first.path), pcm16(second.path)))
    for events, clip in zip(answers, (first, second), strict=True):
        assert kinds(events) == STREAMED
        chunk = TranscriptChunk.from_event(events[1]).text
        assert chunk == text_of(events)
        assert float(chunk) == pytest.approx(clip.duration, abs=0.1)
        assert Transcript.from_event(events[2]).language == "en"


async def _two_utterances(port: int, *audios: bytes) -> list[list[Event]]:
    answers = []
    async with AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as client:
        for audio in audios:
            for event in [Transcribe().event(), *utterance(audio)]:
                await client.write_event(event)
            answers.append(await answer(client))
    return answers


def test_language_and_terms_reach_the_engine(tmp_path: Path, corpus: list[Clip]) -> None:
    """``transcribe``'s model ``name``, its ``language`` (Home Assistant's ``de-DE``:
    Whisper's ``de``) and its names then terms (as the request's ``keywords[]``) are the
    options the engine runs."""
    request = Transcribe(
        name="base",
        language="de-DE",
        transcript_names=["Zorblax Lamp"],
        transcript_terms=["dimmer"],
    )
    (clip,) = short(corpus, 1)
    with served(tmp_path / "data", BOTH, fakes) as http:
        events = transcribed(port_of(http), pcm16(clip.path), request)
    assert kinds(events) == STREAMED
    (options,) = ENGINES[1].options
    assert (options.language, options.keywords) == ("de", ("Zorblax Lamp", "dimmer"))


def test_audio_in_any_format_reaches_the_engine_as_16khz_mono(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """8 kHz stereo 8-bit audio is converted: the engine's one window is as long as what
    was sent (VAD off, so no silence is cut)."""
    (clip,) = short(corpus, 1)
    samples = np.frombuffer(pcm16(clip.path), dtype="<i2")[::2]  # 8 kHz
    unsigned = ((samples.astype(np.int32) >> 8) + 128).astype(np.uint8)
    stereo = np.repeat(unsigned, 2).tobytes()
    env = {"ASRSERVE_VAD_FILTER": "false"}
    with wyoming_app(tmp_path / "data", env) as (app, port):
        events = transcribed(port, stereo, rate=8000, width=1, channels=2)
    assert kinds(events) == STREAMED
    assert app.engines[0].batches == [[pytest.approx(samples.size / 8000, abs=0.01)]]


def _raw(port: int, data: bytes) -> list[Event | None]:
    """``data`` written as is, then the sending side closed; what the server sends back
    until it closes the connection (None)."""

    async def go() -> list[Event | None]:
        reader, writer = await asyncio.open_connection(HOST, port)
        try:
            writer.write(data)
            writer.write_eof()
            got: list[Event | None] = []
            while not got or got[-1] is not None:
                got.append(await asyncio.wait_for(async_read_event(reader), READ_TIMEOUT_S))
            return got
        finally:
            writer.close()

    return asyncio.run(go())


def _framed(*events: Event) -> bytes:
    out = io.BytesIO()
    for event in events:
        write_event(event, out)
    return out.getvalue()


def test_bad_input_gets_an_error_in_its_own_connection(tmp_path: Path) -> None:
    """Each stream broken its own way gets an ``error`` with its code, then the server
    closes that connection; a new connection is served as before."""
    start = AudioStart(rate=16000, width=2, channels=1)
    second = AudioChunk(rate=16000, width=2, channels=1, audio=bytes(32000)).event()
    cases = {
        "bad_event": b"this is not json\n",
        "event_too_large": b'{"type": "audio-chunk", "payload_length": 999999999}\n',
        "audio_without_start": _framed(second),
        "audio_truncated": _framed(start.event(), second),
        "audio_too_long": _framed(start.event(), second, second, second),
        "unsupported_audio_format": _framed(AudioStart(rate=16000, width=2, channels=6).event()),
        "audio_format_changed": _framed(
            start.event(), AudioChunk(rate=8000, width=2, channels=1, audio=bytes(16)).event()
        ),
    }
    env = {"ASRSERVE_WYOMING_MAX_UTTERANCE_S": "2.5"}
    with wyoming_app(tmp_path / "data", env) as (_, port):
        for code, data in cases.items():
            got = _raw(port, data)
            assert [Error.from_event(e).code for e in got if e is not None] == [code], got
            assert got[-1] is None  # the server closed the connection
        assert kinds(asyncio.run(_describe(port))) == ["info"]


def test_a_refused_request_keeps_its_connection(tmp_path: Path) -> None:
    """A language Whisper does not know is refused as any request's would be (``error``
    with the validation's code), and the same connection describes after it."""
    with wyoming_app(tmp_path / "data") as (_, port):
        events = asyncio.run(_refused_then_described(port))
    assert kinds(events) == ["error", "info"]
    assert Error.from_event(events[0]).code == "invalid_request"


async def _refused_then_described(port: int) -> list[Event]:
    async with AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as client:
        for event in [Transcribe(language="xx").event(), *utterance(bytes(3200))]:
            await client.write_event(event)
        events = await answer(client)
        await client.write_event(Describe().event())
        event = await client.read_event()
        assert event is not None
        return [*events, event]


def test_a_bound_key_holds_wyoming_to_its_languages(tmp_path: Path) -> None:
    """``ASRSERVE_WYOMING_KEY`` (the key's secret): ``info`` lists the key's languages only,
    and a request in another language is refused as the key's would be over HTTP."""
    data = tmp_path / "data"
    secret = new_key_here(data, "satellites", "--languages", "de,fr")
    with served(data, {**BOTH, "ASRSERVE_WYOMING_KEY": secret}, fakes) as http:
        (described,) = asyncio.run(_describe(port_of(http)))
        refused = transcribed(port_of(http), bytes(3200), Transcribe(language="en"))
    (model,) = Info.from_event(described).asr[0].models  # tiny.en speaks none of them
    assert (model.name, model.languages) == ("base", ["de", "fr"])
    assert [Error.from_event(e).code for e in refused] == ["language_not_allowed"]


def test_satellites_speaking_at_once_share_forward_passes(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """While the device is held on one utterance, three more arrive from three connections;
    once it is free, one forward pass carries all three, and each gets its own text. (Every
    window padded to 30 s, so that their lengths cannot part them.)"""
    holder, *clips = short(corpus, 4)
    env = {"ASRSERVE_ENCODER_WINDOW": "full"}
    with wyoming_app(tmp_path / "data", env) as (app, port), ThreadPoolExecutor(4) as pool:
        (engine,) = app.engines
        engine.gate.clear()
        held = pool.submit(transcribed, port, pcm16(holder.path))
        assert engine.entered.wait(10), "the first utterance never reached the device"
        answers = [pool.submit(transcribed, port, pcm16(clip.path)) for clip in clips]

        def all_pending() -> dict[str, Any] | None:
            view: dict[str, Any] = app.client.get("/v1/scheduler").json()
            return view if view["pending_chunks"] == len(clips) else None

        wait_until(all_pending, 30, "each satellite's utterance to be pending", every=0.02)
        engine.gate.set()
        heard = [float(text_of(answer.result())) for answer in answers]
        assert kinds(held.result()) == STREAMED
    assert heard == pytest.approx([clip.duration for clip in clips], abs=0.1)
    shared = [batch for batch in engine.batches if len(batch) == len(clips)]
    assert shared, engine.batches
    assert sorted(shared[0]) == pytest.approx(sorted(heard), abs=0.01)


@pytest.mark.slow
def test_jfk_is_heard_through_wyoming_on_the_real_model(tmp_path: Path) -> None:
    """The real tiny.en, the utterance sent as Home Assistant sends it (16 kHz 16-bit mono,
    1024-sample chunks): the streamed chunk is the whole text, and it is JFK's sentence."""
    env = {"ASRSERVE_MODELS": "tiny.en", "ASRSERVE_WYOMING_PORT": "0"}
    with served(tmp_path / "data", env, load_engines) as http:
        events = transcribed(port_of(http), pcm16(JFK), Transcribe(language="en"))
    assert kinds(events) == STREAMED
    text = text_of(events)
    assert TranscriptChunk.from_event(events[1]).text == text
    assert "ask not what your country can do for you" in text.lower()
    assert Transcript.from_event(events[2]).language == "en"


def test_nothing_listens_without_a_port(tmp_path: Path) -> None:
    """Unset ``ASRSERVE_WYOMING_PORT``: no Wyoming server is started."""
    with in_process(tmp_path / "data") as app:
        assert app.client.app.state.wyoming is None  # type: ignore[attr-defined]


def _refused(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=READ_TIMEOUT_S).close()
    except ConnectionRefusedError:
        return True
    return False


def test_an_utterance_being_answered_at_shutdown_is_answered(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """The app stops while the device holds a satellite's utterance: the Wyoming listener
    closes first (a new connection is refused), and the utterance still gets its text."""
    (clip,) = short(corpus, 1)
    app_running = wyoming_app(tmp_path / "data")
    app, port = app_running.__enter__()
    with ThreadPoolExecutor(2) as pool:
        (engine,) = app.engines
        engine.gate.clear()
        held = pool.submit(transcribed, port, pcm16(clip.path))
        assert engine.entered.wait(10), "the utterance never reached the device"
        stopped = pool.submit(app_running.__exit__, None, None, None)
        wait_until(lambda: _refused(port), 30, "the Wyoming listener to close", every=0.02)
        engine.gate.set()
        events = held.result()
        stopped.result()
    assert kinds(events) == STREAMED
    assert float(text_of(events)) == pytest.approx(clip.duration, abs=0.1)


def test_binding_beyond_loopback_warns_that_wyoming_has_no_authentication(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"ASRSERVE_WYOMING_HOST": "0.0.0.0"}
    with caplog.at_level(logging.WARNING, "asrserve.wyoming"), wyoming_app(tmp_path / "d", env):
        pass
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "asrserve.wyoming.server"]
    assert "Wyoming has no authentication" in warning and "the open caller" in warning
