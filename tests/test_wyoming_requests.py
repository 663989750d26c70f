"""What a Wyoming utterance asks of the service, against the app in this process: the
model its ``name`` picks, its language (a region tag, detected, the key's default), the
names and terms that become its keywords, and the bound key (by secret or id, its
languages, revoked, its quota, its rate limit not applied, missing at start)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from wyoming.asr import Transcribe, Transcript, TranscriptStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info

from asrserve.auth.keys import hash_secret
from asrserve.auth.sqlite import SqliteKeyStore
from asrserve.bench.corpus import Clip
from asrserve.cli.main import main
from asrserve.drivers.sqlite import Database
from tests.support.inprocess import served, settings_for
from tests.support.keys import auth, new_key_here
from tests.support.wyoming import (
    BOTH,
    ENGINES,
    HOST,
    READ_TIMEOUT_S,
    STREAMED,
    answer,
    answered_in_turn,
    answered_then_pinged,
    describe,
    fakes,
    kinds,
    pcm16,
    ping,
    ponged,
    port_of,
    short,
    transcribed,
    utterance,
    wyoming_app,
)


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
        (described,) = asyncio.run(describe(port_of(http)))
        refused = transcribed(port_of(http), bytes(3200), Transcribe(language="en"))
    (model,) = Info.from_event(described).asr[0].models  # tiny.en speaks none of them
    assert (model.name, model.languages) == ("base", ["de", "fr"])
    assert [Error.from_event(e).code for e in refused] == ["language_not_allowed"]


def key_id(data: Path, secret: str) -> str:
    """The id of the key whose secret is ``secret``, read from ``data``'s key store."""

    async def find() -> str:
        db = Database(settings_for(data, {}).db_path)
        try:
            key = await SqliteKeyStore(db).find(hash_secret(secret))
        finally:
            db.close()
        assert key is not None
        return key.id

    return asyncio.run(find())


def test_a_key_bound_by_its_id_holds_wyoming_to_its_languages(tmp_path: Path) -> None:
    """``ASRSERVE_WYOMING_KEY`` given as the key's id (not its secret) binds the key:
    ``info`` lists the key's languages only."""
    data = tmp_path / "data"
    bound = key_id(data, new_key_here(data, "satellites", "--languages", "de,fr"))
    assert bound.startswith("key_")
    with served(data, {**BOTH, "ASRSERVE_WYOMING_KEY": bound}, fakes) as http:
        (described,) = asyncio.run(describe(port_of(http)))
    (model,) = Info.from_event(described).asr[0].models
    assert (model.name, model.languages) == ("base", ["de", "fr"])


def test_a_revoked_key_is_refused_at_the_next_utterance_and_the_connection_stays(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """The bound key revoked (``asrserve keys revoke``) between two utterances on one
    connection: the first is answered, the second gets ``error`` ``invalid_api_key``, and
    the connection still answers a ping."""
    (clip,) = short(corpus, 1)
    data = tmp_path / "data"
    bound = key_id(data, new_key_here(data, "satellites"))
    env = {"ASRSERVE_WYOMING_KEY": bound}
    with wyoming_app(data, env) as (_, port):
        first, second, pong = asyncio.run(_revoked_between(port, pcm16(clip.path), data, bound))
    assert kinds(first) == STREAMED
    assert [Error.from_event(e).code for e in second] == ["invalid_api_key"]
    assert ponged(pong, "open")


async def _revoked_between(
    port: int, audio: bytes, data: Path, bound: str
) -> tuple[list[Event], list[Event], Event | None]:
    async with AsyncTcpClient(HOST, port, read_timeout=READ_TIMEOUT_S) as client:
        answers = []
        for revoke in (False, True):
            if revoke:
                command = ["keys", "revoke", bound, "--data-dir", str(data)]
                assert await asyncio.to_thread(main, command) == 0
            for event in [Transcribe().event(), *utterance(audio)]:
                await client.write_event(event)
            answers.append(await answer(client))
        return answers[0], answers[1], await ping(client, "open")


def test_a_name_that_is_no_served_model_picks_the_default(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """``transcribe``'s ``name`` the program's (``asrserve``), not a served model's: the
    utterance runs on the default model (the first served, tiny.en), not on base."""
    (clip,) = short(corpus, 1)
    with served(tmp_path / "data", BOTH, fakes) as http:
        events = transcribed(port_of(http), pcm16(clip.path), Transcribe(name="asrserve"))
    assert kinds(events) == STREAMED
    assert (len(ENGINES[0].options), ENGINES[1].options) == (1, [])


def test_a_language_tag_with_an_underscore_region_is_whispers_code(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """``pt_BR``: the request's language is ``pt``, as the engine runs it and as
    ``transcript-start`` names it."""
    (clip,) = short(corpus, 1)
    request = Transcribe(name="base", language="pt_BR")
    with served(tmp_path / "data", BOTH, fakes) as http:
        events = transcribed(port_of(http), pcm16(clip.path), request)
    assert kinds(events) == STREAMED
    (options,) = ENGINES[1].options
    assert options.language == "pt"
    assert TranscriptStart.from_event(events[0]).language == "pt"


def test_an_unset_language_is_detected(tmp_path: Path, corpus: list[Clip]) -> None:
    """No ``language``: ``transcript-start`` names none, and ``transcript`` carries the one
    detected (the fake base detects German)."""
    (clip,) = short(corpus, 1)
    with served(tmp_path / "data", BOTH, fakes) as http:
        events = transcribed(port_of(http), pcm16(clip.path), Transcribe(name="base"))
    assert kinds(events) == STREAMED
    assert TranscriptStart.from_event(events[0]).language is None
    assert Transcript.from_event(events[2]).language == "de"
    assert ENGINES[1].detections


def test_an_unset_language_is_the_bound_keys_default(tmp_path: Path, corpus: list[Clip]) -> None:
    """No ``language`` and a bound key whose default language is French: the request is in
    French, undetected."""
    (clip,) = short(corpus, 1)
    data = tmp_path / "data"
    secret = new_key_here(data, "satellites", "--default-language", "fr")
    env = {**BOTH, "ASRSERVE_WYOMING_KEY": secret}
    with served(data, env, fakes) as http:
        events = transcribed(port_of(http), pcm16(clip.path), Transcribe(name="base"))
    assert kinds(events) == STREAMED
    (options,) = ENGINES[1].options
    assert (options.language, ENGINES[1].detections) == ("fr", [])


def test_names_and_terms_beyond_the_request_limits_are_left_out(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """Terms the request schema refuses (``<|``, over 64 characters) are dropped, and only
    the first that fit are kept: 150 bytes joined in one utterance, 32 terms in the next;
    neither is refused."""
    (clip,) = short(corpus, 1)
    lamps = [f"Lamp {i:02}" for i in range(1, 41)]
    letters = [chr(ord("a") + i % 26) for i in range(40)]
    by_bytes = Transcribe(
        transcript_names=["Kitchen Light", "<|endoftext|>", "  Porch  "],
        transcript_terms=["x" * 65, *lamps],
    )
    with wyoming_app(tmp_path / "data") as (app, port):
        audio = pcm16(clip.path)
        for request in (by_bytes, Transcribe(transcript_terms=letters)):
            assert kinds(transcribed(port, audio, request)) == STREAMED
        (engine,) = app.engines
    assert (
        [options.keywords for options in engine.options]
        == [
            ("Kitchen Light", "Porch", *lamps[:14]),  # 146 bytes joined; a 15th makes 155
            tuple(letters[:32]),
        ]
    )


def test_a_spent_quota_is_refused_and_the_connection_stays(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """A bound key with a daily audio quota of 0.6 s: a longer utterance gets ``error``
    ``quota_exceeded``, and the connection still answers a ping."""
    (clip,) = short(corpus, 1)
    assert clip.duration > 0.6
    data = tmp_path / "data"
    secret = new_key_here(data, "satellites", "--audio-minutes-per-day", "0.01")
    with wyoming_app(data, {"ASRSERVE_WYOMING_KEY": secret}) as (app, port):
        refused, pong = asyncio.run(answered_then_pinged(port, pcm16(clip.path)))
        (engine,) = app.engines
    assert [Error.from_event(e).code for e in refused] == ["quota_exceeded"]
    assert ponged(pong, "open")
    assert engine.batches == []


def test_the_bound_keys_rate_limit_is_not_applied_to_wyoming(
    tmp_path: Path, corpus: list[Clip]
) -> None:
    """A bound key of one request a minute, spent over HTTP (its second request there is
    refused: 429 ``rate_limit_exceeded``): two utterances in a row on Wyoming are both
    answered."""
    (clip,) = short(corpus, 1)
    data = tmp_path / "data"
    secret = new_key_here(data, "satellites", "--rpm", "1")
    env = {"ASRSERVE_AUTH": "on", "ASRSERVE_WYOMING_KEY": secret}
    with wyoming_app(data, env) as (app, port):
        http = [app.client.get("/v1/jobs", headers=auth(secret)) for _ in range(2)]
        audio = pcm16(clip.path)
        answers = asyncio.run(answered_in_turn(port, audio, audio))
    assert [response.status_code for response in http] == [200, 429]
    assert http[1].json()["error"]["code"] == "rate_limit_exceeded"
    assert [kinds(events) for events in answers] == [STREAMED, STREAMED]


def test_a_bound_key_not_found_at_start_is_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    env = {"ASRSERVE_WYOMING_KEY": "key_nosuchkey"}
    with caplog.at_level(logging.WARNING, "asrserve.wyoming"), wyoming_app(tmp_path / "d", env):
        pass
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "asrserve.wyoming.server"]
    assert "ASRSERVE_WYOMING_KEY names no active API key" in warning
