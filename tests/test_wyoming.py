"""The Wyoming server (Home Assistant's speech-to-text) against the app in this process,
through the protocol library's own client: what it describes, how an utterance is
answered and streamed, audio converted to 16 kHz mono, ping and idle connections,
shutdown, that satellites speaking at once share forward passes (with each other and with
HTTP requests), and, on the real tiny.en, that JFK's sentence is heard. What an utterance
asks for (model, language, terms, the bound key): test_wyoming_requests.py; what goes
wrong (bad input, a failed job, the deadline): test_wyoming_failures.py."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from wyoming.asr import Transcribe, Transcript, TranscriptChunk
from wyoming.client import AsyncTcpClient
from wyoming.event import Event
from wyoming.info import Info

from asrserve.bench.corpus import Clip
from asrserve.engine.registry import load_engines
from asrserve.languages import LANGUAGE_NAMES
from tests.support.inprocess import InProcess, in_process, served
from tests.support.turnstile import Turnstile
from tests.support.wait import wait_until
from tests.support.wyoming import (
    BOTH,
    ENDS,
    HOST,
    READ_TIMEOUT_S,
    STREAMED,
    answer,
    answered_in_turn,
    describe,
    fakes,
    kinds,
    pcm16,
    ping,
    ponged,
    port_of,
    short,
    text_of,
    transcribed,
    utterance,
    wyoming_app,
)

JFK = Path(__file__).parent / "data" / "jfk.flac"


def test_describe_lists_each_served_model_and_its_languages(tmp_path: Path) -> None:
    with served(tmp_path / "data", BOTH, fakes) as http:
        (event,) = asyncio.run(describe(port_of(http)))
    (program,) = Info.from_event(event).asr
    assert (program.name, program.supports_transcript_streaming) == ("asrserve", True)
    assert {model.name: model.languages for model in program.models} == {
        "tiny.en": ["en"],
        "base": list(LANGUAGE_NAMES),
    }


def test_each_utterance_is_streamed_then_answered_whole_on_one_connection(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """The fake engine decodes a window to its length: each utterance's own text comes as
    ``transcript-start``, a chunk, ``transcript`` and ``transcript-stop``, and the
    connection stays open for the next utterance."""
    first, second = short(corpus, 2)
    with wyoming_app(tmp_path / "data") as (_, port):
        answers = asyncio.run(answered_in_turn(port, pcm16(first.path), pcm16(second.path)))
    for events, clip in zip(answers, (first, second), strict=True):
        assert kinds(events) == STREAMED
        chunk = TranscriptChunk.from_event(events[1]).text
        assert chunk == text_of(events)
        assert float(chunk) == pytest.approx(clip.duration, abs=0.1)
        assert Transcript.from_event(events[2]).language == "en"


def test_a_long_utterance_is_streamed_in_chunks_that_join_to_its_text(
    tmp_path: Path, long_clip: Clip
) -> None:
    """An utterance of over two minutes (five windows), the engine letting one forward pass
    through and holding the rest until the first ``transcript-chunk`` has come: more than
    one chunk comes, and joined they are the ``transcript``'s text exactly."""
    env = {"ASRSERVE_WYOMING_MAX_UTTERANCE_S": "300"}
    with wyoming_app(tmp_path / "data", env) as (app, port):
        (engine,) = app.engines
        engine.gate = turnstile = Turnstile()
        turnstile.hold()
        turnstile.let(1)  # the first window's pass
        try:
            events = asyncio.run(_released_at_first_chunk(port, pcm16(long_clip.path), turnstile))
        finally:
            turnstile.set()
    assert kinds(events)[0] == "transcript-start"
    assert kinds(events)[-2:] == ["transcript", "transcript-stop"]
    chunks = [TranscriptChunk.from_event(e).text for e in events if TranscriptChunk.is_type(e.type)]
    assert len(chunks) > 1, chunks
    assert "".join(chunks) == text_of(events)


async def _released_at_first_chunk(port: int, audio: bytes, gate: Turnstile) -> list[Event]:
    """The utterance sent; the events up to its first ``transcript-chunk``, then ``gate``
    opened for every pass, then the rest of the answer."""
    async with AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as client:
        for event in [Transcribe().event(), *utterance(audio)]:
            await client.write_event(event)
        events: list[Event] = []
        while not events or events[-1].type not in ("transcript-chunk", *ENDS):
            try:
                event = await client.read_event()
            except TimeoutError:
                raise AssertionError(f"no transcript-chunk came, only {kinds(events)}") from None
            assert event is not None, f"the connection closed after {kinds(events)}"
            events.append(event)
        gate.set()
        return events if events[-1].type in ENDS else [*events, *await answer(client)]


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


def test_an_utterance_shares_a_forward_pass_with_http_traffic_at_interactive_priority(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """While the device is held on one utterance, another utterance and a synchronous
    ``POST /v1/audio/transcriptions`` arrive; once it is free, one forward pass carries
    both, and the utterance's job is at interactive priority. (Every window padded to 30 s,
    so that their lengths cannot part them.)"""
    holder, spoken, posted = short(corpus, 3)
    env = {"ASRSERVE_ENCODER_WINDOW": "full"}
    with wyoming_app(tmp_path / "data", env) as (app, port), ThreadPoolExecutor(3) as pool:
        (engine,) = app.engines
        engine.gate = turnstile = Turnstile()
        turnstile.hold()
        try:
            held = pool.submit(transcribed, port, pcm16(holder.path))
            turnstile.until_waiting(1)  # the device holds the first utterance
            heard = pool.submit(transcribed, port, pcm16(spoken.path))
            answered = pool.submit(_posted, app, posted.path)

            def both_pending() -> bool:
                return bool(app.client.get("/v1/scheduler").json()["pending_chunks"] == 2)

            wait_until(both_pending, 30, "the utterance and the upload to be pending", every=0.02)
        finally:
            turnstile.set()
        texts = [float(text_of(heard.result())), float(answered.result())]
        assert kinds(held.result()) == STREAMED
        jobs = {job["filename"]: job for job in app.client.get("/v1/jobs").json()["data"]}
    assert jobs["wyoming.wav"]["priority"] == "interactive"
    assert jobs[posted.path.name]["status"] == "succeeded"
    assert texts == pytest.approx([spoken.duration, posted.duration], abs=0.1)
    shared = [sorted(batch) for batch in engine.batches if len(batch) == 2]
    assert shared == [pytest.approx(sorted(texts), abs=0.01)], engine.batches


def _posted(app: InProcess, path: Path) -> str:
    """The file transcribed by ``POST /v1/audio/transcriptions``: its text."""
    with path.open("rb") as audio:
        response = app.client.post(
            "/v1/audio/transcriptions",
            files={"file": (path.name, audio)},
            data={"model": "whisper-1"},
        )
    assert response.status_code == 200, response.text
    text: str = response.json()["text"]
    return text


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


def test_a_ping_is_answered_with_its_text_and_the_connection_goes_on(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """``ping`` gets ``pong`` carrying the ping's text, and the same connection's next
    utterance is answered."""
    (clip,) = short(corpus, 1)
    with wyoming_app(tmp_path / "data") as (_, port):
        pong, events = asyncio.run(_ping_then_utterance(port, pcm16(clip.path)))
    assert ponged(pong, "are you there")
    assert kinds(events) == STREAMED


async def _ping_then_utterance(port: int, audio: bytes) -> tuple[Event | None, list[Event]]:
    async with AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as client:
        pong = await ping(client, "are you there")
        for event in [Transcribe().event(), *utterance(audio)]:
            await client.write_event(event)
        return pong, await answer(client)


def test_an_idle_connection_is_closed_and_a_sending_one_is_not(tmp_path: Path) -> None:
    """With ``ASRSERVE_WYOMING_IDLE_TIMEOUT_S``: a connection that sends nothing is closed by
    the server (its client reads the end), while one that pings without pause all that time
    is still answered after it."""
    env = {"ASRSERVE_WYOMING_IDLE_TIMEOUT_S": "1"}
    with wyoming_app(tmp_path / "data", env) as (_, port):
        idle_end, last = asyncio.run(
            asyncio.wait_for(_idle_beside_busy(port), READ_TIMEOUT_S)  # a broken server
        )
    assert idle_end is None  # the server closed the idle connection
    assert ponged(last, "still here")


async def _idle_beside_busy(port: int) -> tuple[Event | None, Event | None]:
    """Ping on one connection, each pong awaited, until the other (silent) one ends; then
    one ping more."""
    async with (
        AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as busy,
        AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as idle,
    ):
        idle_end = asyncio.create_task(idle.read_event())
        sent = 0
        while not idle_end.done():
            sent += 1
            assert ponged(await ping(busy, str(sent)), str(sent)), f"ping {sent}"
        return idle_end.result(), await ping(busy, "still here")


def test_an_utterance_without_audio_gets_an_empty_transcript_and_no_job(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """``audio-start`` then ``audio-stop``: an empty ``transcript`` streamed, and no job
    made (the next utterance, with audio, is the only job listed)."""
    (clip,) = short(corpus, 1)
    with wyoming_app(tmp_path / "data") as (app, port):
        silent = transcribed(port, b"")
        jobs_after_silence = app.client.get("/v1/jobs").json()["data"]
        assert kinds(transcribed(port, pcm16(clip.path))) == STREAMED
        jobs_after_speech = app.client.get("/v1/jobs").json()["data"]
    assert kinds(silent) == ["transcript-start", "transcript", "transcript-stop"]
    assert Transcript.from_event(silent[1]).text == ""
    assert (len(jobs_after_silence), len(jobs_after_speech)) == (0, 1)


def test_other_event_types_are_dropped(tmp_path: Path) -> None:
    """``select-program`` and a type nobody defined get no answer and keep the connection:
    the next event back is the ``pong`` to the ping after them."""
    dropped = [
        Event(type="select-program", data={"name": "asrserve"}),
        Event(type="no-such-event", data={"x": 1}, payload=b"\x00\x01"),
    ]
    with wyoming_app(tmp_path / "data") as (_, port):
        pong = asyncio.run(_sent_then_pinged(port, dropped))
    assert ponged(pong, "after")


async def _sent_then_pinged(port: int, events: list[Event]) -> Event | None:
    async with AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as client:
        for event in events:
            await client.write_event(event)
        return await ping(client, "after")


def test_at_shutdown_an_idle_connection_closes_at_once_and_a_sending_one_is_answered(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """The app stops while one connection is idle and another is halfway through sending an
    utterance: the idle one is closed while the other's utterance is still unfinished, and
    the rest of that utterance, sent after, is answered. (Idle timeout and grace far above
    the test's bound, so neither is what closes or spares a connection.)"""
    (clip,) = short(corpus, 1)
    env = {"ASRSERVE_WYOMING_IDLE_TIMEOUT_S": "600", "ASRSERVE_SHUTDOWN_GRACE_S": "600"}
    app_running = wyoming_app(tmp_path / "data", env)
    _, port = app_running.__enter__()

    def stop() -> None:
        app_running.__exit__(None, None, None)

    sent = utterance(pcm16(clip.path))
    idle_end, events = asyncio.run(
        asyncio.wait_for(_stopped_between(port, sent, stop), READ_TIMEOUT_S)  # a broken server
    )
    assert idle_end is None  # closed by the server
    assert kinds(events) == STREAMED
    assert float(text_of(events)) == pytest.approx(clip.duration, abs=0.1)


async def _stopped_between(
    port: int, sent: list[Event], stop: Callable[[], None]
) -> tuple[Event | None, list[Event]]:
    """Half of ``sent`` on one connection (a pong on each says the server has read all before
    it), ``stop`` begun, the other connection's end read, then the rest of ``sent``."""
    half = len(sent) // 2
    async with (
        AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as busy,
        AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as idle,
    ):
        for event in [Transcribe().event(), *sent[:half]]:
            await busy.write_event(event)
        assert ponged(await ping(busy, "busy"), "busy")
        assert ponged(await ping(idle, "idle"), "idle")
        stopping = asyncio.create_task(asyncio.to_thread(stop))
        idle_end = await idle.read_event()
        for event in sent[half:]:
            await busy.write_event(event)
        events = await answer(busy)
        await stopping
        return idle_end, events
