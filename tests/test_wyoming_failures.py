"""What goes wrong on the Wyoming server, against the app in this process: a broken stream
gets an ``error`` with its code and is closed; a job that fails, and an utterance not done
within the synchronous deadline, get an ``error`` and keep the connection."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient
from wyoming.audio import AudioChunk, AudioStart
from wyoming.error import Error
from wyoming.event import Event, async_read_event, write_event

from asrserve.bench.corpus import Clip
from tests.support.turnstile import Turnstile
from tests.support.wyoming import (
    HOST,
    READ_TIMEOUT_S,
    answered_then_pinged,
    describe,
    kinds,
    pcm16,
    ponged,
    short,
    wyoming_app,
)


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
    closes that connection; a new connection is served as before. (An event's data or
    payload over its limit; the client's side closed between an utterance's events or
    inside one event's payload; a 16-bit chunk of 3 bytes, not whole samples.)"""
    start = AudioStart(rate=16000, width=2, channels=1)
    second = AudioChunk(rate=16000, width=2, channels=1, audio=bytes(32000)).event()
    odd = AudioChunk(rate=16000, width=2, channels=1, audio=bytes(3)).event()
    cases = [
        ("bad_event", b"this is not json\n"),
        ("event_too_large", b'{"type": "audio-chunk", "payload_length": 999999999}\n'),
        ("event_too_large", b'{"type": "describe", "data_length": 65537}\n'),
        ("audio_without_start", _framed(second)),
        ("audio_truncated", _framed(start.event(), second)),
        ("audio_truncated", b'{"type": "audio-chunk", "payload_length": 10}\nabc'),
        ("audio_too_long", _framed(start.event(), second, second, second)),
        ("unsupported_audio_format", _framed(AudioStart(rate=16000, width=2, channels=6).event())),
        ("bad_audio", _framed(start.event(), odd)),
        (
            "audio_format_changed",
            _framed(
                start.event(), AudioChunk(rate=8000, width=2, channels=1, audio=bytes(16)).event()
            ),
        ),
    ]
    env = {"ASRSERVE_WYOMING_MAX_UTTERANCE_S": "2.5"}
    with wyoming_app(tmp_path / "data", env) as (_, port):
        for code, data in cases:
            got = _raw(port, data)
            assert [Error.from_event(e).code for e in got if e is not None] == [code], got
            assert got[-1] is None  # the server closed the connection
        assert kinds(asyncio.run(describe(port))) == ["info"]


def _codes(answer: list[Event]) -> list[str | None]:
    """The codes of an answer's ``error`` events (a ``transcript-start`` may come first:
    the job's windows were known before it ended)."""
    return [Error.from_event(e).code for e in answer if Error.is_type(e.type)]


def _jobs(http: TestClient) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = http.get("/v1/jobs").json()["data"]
    return jobs


def test_a_failed_job_gets_its_code_and_the_connection_stays(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """The engine fails the utterance's one window (VAD off: the window is the whole
    utterance): an ``error`` with the failed job's code, and the same connection answers a
    ping after it."""
    (clip,) = short(corpus, 1)
    audio = pcm16(clip.path)
    with wyoming_app(tmp_path / "data", {"ASRSERVE_VAD_FILTER": "false"}) as (app, port):
        (engine,) = app.engines
        engine.fail_on = len(audio) / 32000  # the window's seconds: 16 kHz, 2 bytes a sample
        failed, pong = asyncio.run(answered_then_pinged(port, audio))
        (job,) = _jobs(app.client)
    assert engine.batches, "the window never reached the engine"
    assert job["status"] == "failed"
    assert _codes(failed) == [job["error"]["code"]]
    assert job["error"]["code"] == "internal_error"
    assert ponged(pong, "open")


def test_an_utterance_past_the_deadline_is_cancelled_and_the_connection_stays(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """``ASRSERVE_SYNC_TIMEOUT_S`` of 1 s while the engine holds the utterance's forward
    pass (released only once the test has read all it asks): ``error``
    ``deadline_exceeded``, the job cancelled, and the same connection answers a ping."""
    (clip,) = short(corpus, 1)
    with wyoming_app(tmp_path / "data", {"ASRSERVE_SYNC_TIMEOUT_S": "1"}) as (app, port):
        (engine,) = app.engines
        engine.gate = turnstile = Turnstile()
        turnstile.hold()
        try:
            late, pong = asyncio.run(answered_then_pinged(port, pcm16(clip.path)))
            held = turnstile.waiting
            (job,) = _jobs(app.client)
        finally:
            turnstile.set()
    assert held == 1  # the pass was still in the engine when the error came
    assert _codes(late) == ["deadline_exceeded"]
    assert job["status"] == "cancelled"
    assert ponged(pong, "open")
