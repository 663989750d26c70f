"""A live session against the real scheduler and a fake engine (which decodes a window to
its length as text): turns committed by the client, interims that give way to newer ones,
and the limits that end a session."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asrserve.audio.decode import decode
from asrserve.batcher.device import Device
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.engine.base import NEVER, ChunkInput, Pause, RawSegment, Settled, unheard
from asrserve.errors import QuotaExceeded
from asrserve.live.decoder import LiveDecoder
from asrserve.live.errors import LiveError
from asrserve.live.session import LiveLimits, LiveSession, SessionConfig
from asrserve.live.turns import TurnDetection
from asrserve.settings import Settings
from asrserve.vocabulary import Priority, TranscriptionOptions
from tests.support.fakes import FakeEngine, chunk, raw_segment

JFK = Path(__file__).parents[1] / "data" / "jfk.flac"
MANUAL = SessionConfig(options=TranscriptionOptions(), turn_detection=None, input_rate=16000)
PATIENT = LiveLimits(interim_deadline_s=60.0, final_deadline_s=60.0)


def pcm(seconds: float) -> bytes:
    return np.zeros(int(seconds * 16000), dtype="<i2").tobytes()


class Wall:
    """The session's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run(
    body: Callable[[LiveSession, FakeEngine, Scheduler, Wall], Awaitable[None]],
    limits: LiveLimits = PATIENT,
    charge: Callable[[float], Awaitable[None]] | None = None,
    engine: FakeEngine | None = None,
    config: SessionConfig = MANUAL,
) -> tuple[FakeEngine, list[dict[str, Any]]]:
    engine = engine or FakeEngine()
    charged: list[float] = []
    events: list[dict[str, Any]] = []

    async def count(seconds: float) -> None:
        charged.append(seconds)

    charge = charge or count

    async def main() -> None:
        scheduler = Scheduler([Device.of("0", engine)], SchedulerConfig("greedy"))
        loops = asyncio.create_task(scheduler.run())
        wall = Wall()
        decoder = LiveDecoder(scheduler, Settings())
        session = LiveSession("sess_1", decoder, config, limits, charge, clock=wall)
        await session.open()  # as LiveSessions opens it
        try:
            await asyncio.wait_for(body(session, engine, scheduler, wall), 10)
            await session.drain()
        finally:
            engine.gate.set()
            await session.close()
            loops.cancel()
            await asyncio.gather(loops, return_exceptions=True)
            scheduler.close()
        while not session.events.empty():
            events.append(session.events.get_nowait())

    asyncio.run(main())
    events.append({"type": "charged", "seconds": charged})
    return engine, events


def test_a_committed_turn_completes_with_its_text() -> None:
    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        wall.now = 3.0
        await session.append(pcm(1.5))
        await session.append(pcm(1.0))
        await session.commit()

    _, events = run(body)
    types = [event["type"] for event in events]
    assert types[-4:] == [
        "input_audio_buffer.committed",
        "conversation.item.input_audio_transcription.delta",  # what no interim showed
        "conversation.item.input_audio_transcription.completed",
        "charged",
    ], types
    completed = events[-2]
    assert completed["transcript"] == "2.5" and completed["item_id"] == events[-4]["item_id"]
    assert events[-3]["delta"] == "2.5" and events[-3]["item_id"] == events[-4]["item_id"]
    assert events[-1]["seconds"] == [2.0, 2.0]  # 2 s at open, 2 s more once 2.5 s arrived


def test_a_turn_is_decoded_on_the_text_of_the_turn_before_it() -> None:
    """The second turn ends while the first one's final decode still runs: it waits for
    that text to condition on (the fake engine's text is a window's length)."""

    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        engine.gate.clear()
        wall.now = 10.0
        await session.append(pcm(1.5))
        await session.commit()
        assert await asyncio.to_thread(engine.entered.wait, 5)  # the first turn's decode runs
        await session.append(pcm(2.5))
        await session.commit()
        engine.gate.set()

    engine, events = run(body, LiveLimits(interim_s=100.0, final_deadline_s=60.0))
    assert engine.contexts == ["", "1.5"]
    completed = [e["transcript"] for e in events if e["type"].endswith("transcription.completed")]
    assert completed == ["1.5", "2.5"]


def test_the_sessions_prompt_reaches_every_decode_of_its_turns() -> None:
    """A prompt set on the session (``input_audio_transcription.prompt``) goes with the
    turn's interim decodes and its final one."""
    prompted = TranscriptionOptions(prompt="Kubernetes, kubectl")

    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        session.configure(dataclasses.replace(MANUAL, options=prompted))
        wall.now = 10.0
        await session.append(pcm(1.0))  # an interim decode
        await session.drain()
        await session.append(pcm(0.5))
        await session.commit()  # the final one

    engine, _ = run(body)
    assert engine.batches == [[1.0], [1.5]]
    assert [o.prompt for o in engine.options] == ["Kubernetes, kubectl"] * 2


def test_a_turn_the_engine_fails_on_is_failed_and_the_session_goes_on() -> None:
    """The engine raises on the first turn's window (1.5 s): that turn gets
    ``...transcription.failed`` naming its item, the next one completes."""

    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        wall.now = 10.0
        await session.append(pcm(1.5))
        await session.commit()
        await session.append(pcm(2.5))
        await session.commit()

    poisoned = FakeEngine(fail_on=1.5)
    _, events = run(body, LiveLimits(interim_s=100.0, final_deadline_s=60.0), engine=poisoned)
    committed = [e["item_id"] for e in events if e["type"] == "input_audio_buffer.committed"]
    failed = [e for e in events if e["type"].endswith("transcription.failed")]
    completed = [e for e in events if e["type"].endswith("transcription.completed")]
    assert [e["item_id"] for e in failed + completed] == committed, events
    assert failed[0]["error"]["code"] == "internal_error"
    assert completed[0]["transcript"] == "2.5"
    assert not [e for e in events if e["type"] == "error"]  # a turn's failure is not the session's


class ScriptedEngine(FakeEngine):
    """Decodes the n-th window to the n-th text of its script."""

    def __init__(self, script: list[str]) -> None:
        super().__init__()
        self.script = script

    def transcribe_batch(
        self,
        chunks: Sequence[ChunkInput],
        options: TranscriptionOptions,
        settled: Settled = unheard,
        pause: Pause = NEVER,
    ) -> list[list[RawSegment]]:
        super().transcribe_batch(chunks, options, settled, pause)
        return [[raw_segment(0.0, c.duration, " " + self.script.pop(0))] for c in chunks]


def test_sent_words_stay_when_the_final_decode_disagrees() -> None:
    """Interim decodes agree on "the quick", then disagree; the final decode heard "A
    quick…": the completed text keeps the sent words and adds the final decode's rest, which
    goes out as one last delta, so the deltas joined are the completed text."""
    script = ["the quick", "the quick brown", "the quack brown fox", "A quick brown fox jumps."]

    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        wall.now = 10.0
        for _ in range(3):
            await session.append(pcm(1.0))
            await session.drain()  # each interim runs (none replaces another)
        await session.commit()

    engine, events = run(body, engine=ScriptedEngine(script))
    deltas = [e["delta"] for e in events if e["type"].endswith("transcription.delta")]
    done = [e["transcript"] for e in events if e["type"].endswith("transcription.completed")]
    assert (deltas, done) == (["the quick", " brown fox jumps."], ["the quick brown fox jumps."])
    assert engine.batches == [[1.0], [2.0], [3.0], [3.0]]


def test_a_newer_interim_replaces_one_no_device_has_started() -> None:
    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        engine.gate.clear()
        s.submit_chunks("other", Priority.INTERACTIVE, TranscriptionOptions(), [chunk(5.0)])
        assert await asyncio.to_thread(engine.entered.wait, 5)  # the one device is busy
        wall.now = 10.0
        await session.append(pcm(1.0))  # an interim of 1 s goes in...
        assert s.pending_count() == 1
        await session.append(pcm(1.0))  # ...and gives way to one of 2 s
        await session.append(pcm(0.5))
        engine.gate.set()
        await session.drain()

    engine, _ = run(body)
    assert engine.batches == [[5.0], [2.0]]  # the 1 s interim never ran


def test_audio_faster_than_real_time_ends_the_session() -> None:
    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        wall.now = 1.0
        await session.append(pcm(8.0))  # 8 s ahead (the silent second before banks nothing)
        session.configure(MANUAL)  # a new input format does not start the count again
        with pytest.raises(LiveError) as caught:
            await session.append(pcm(4.0))  # 11 s ahead
        assert caught.value.code == "input_too_fast" and caught.value.fatal

    run(body, LiveLimits(interim_s=100.0))


def test_a_buffer_never_committed_ends_the_session() -> None:
    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        for second in range(28):
            wall.now = second + 1.0
            await session.append(pcm(1.0))
        wall.now = 29.0
        with pytest.raises(LiveError) as caught:  # 29 s: what one window holds, less margin
            await session.append(pcm(1.0))
        assert caught.value.code == "input_audio_buffer_too_long" and caught.value.fatal

    run(body, LiveLimits(interim_s=100.0))


def test_an_empty_commit_is_an_error_the_session_survives() -> None:
    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        with pytest.raises(LiveError) as caught:
            await session.commit()
        assert caught.value.code == "input_audio_buffer_commit_empty"
        assert not caught.value.fatal
        wall.now = 2.0
        await session.append(pcm(1.0))
        await session.commit()

    _, events = run(body)
    assert events[-2]["transcript"] == "1.0"


def test_closing_drops_the_decodes_not_started() -> None:
    pending: list[int] = []

    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        engine.gate.clear()
        [other] = s.submit_chunks(
            "other", Priority.INTERACTIVE, TranscriptionOptions(), [chunk(5.0)]
        )
        assert await asyncio.to_thread(engine.entered.wait, 5)
        wall.now = 5.0
        await session.append(pcm(1.0))
        assert s.pending_count() == 1  # the turn's interim, queued behind the busy device
        await session.close()
        assert s.pending_count() == 0  # given up: no longer counted as pending
        engine.gate.set()
        await other
        for _ in range(20):  # loop turns: the free device looks at what is pending
            await asyncio.sleep(0)
        pending.append(s.pending_count())

    engine, _ = run(body)
    assert pending == [0] and engine.batches == [[5.0]]


def test_audio_is_charged_as_it_arrives_committed_or_not() -> None:
    """Audio cleared, never committed, is charged all the same, 2 s ahead: interim text
    is not free. A charge that raises (a used-up quota) fails the append."""
    quota = 4.0

    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        wall.now = 5.0
        await session.append(pcm(1.5))
        session.clear()
        await session.append(pcm(1.5))  # 3 s: the second 2 s are charged
        session.clear()
        with pytest.raises(QuotaExceeded):
            await session.append(pcm(1.5))  # 4.5 s: past the 4 s left

    charged: list[float] = []

    async def charge(seconds: float) -> None:
        if sum(charged) + seconds > quota:
            raise QuotaExceeded("used up", retry_after=60)
        charged.append(seconds)

    run(body, charge=charge)
    assert charged == [2.0, 2.0]


def test_time_spent_silent_banks_no_burst_credit() -> None:
    """After 100 s without audio a client may still send only 10 s ahead of real time
    (it could send 110 s at once)."""

    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        wall.now = 100.0
        await session.append(pcm(9.0))
        with pytest.raises(LiveError) as caught:
            await session.append(pcm(2.0))  # 11 s ahead
        assert caught.value.code == "input_too_fast"

    run(body, LiveLimits(interim_s=100.0))


class MultilingualEngine(FakeEngine):
    multilingual = True


def test_a_session_under_a_limited_key_detects_only_among_its_languages() -> None:
    """A multilingual model, no language named, a key allowing de and fr: the turn's
    language is detected among those two alone, and once known, not again."""
    limited = TranscriptionOptions(languages=("de", "fr"))

    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        session.configure(dataclasses.replace(MANUAL, options=limited))
        wall.now = 10.0
        for _ in range(2):
            await session.append(pcm(1.0))
            await session.commit()

    engine, events = run(body, engine=MultilingualEngine(language="fr"))
    assert engine.restrictions == [("de", "fr")]
    assert [o.language for o in engine.options] == ["fr", "fr"]
    assert [e["transcript"] for e in events if e["type"].endswith("completed")] == ["1.0", "1.0"]


def vad_edges(update_at_s: float | None) -> list[tuple[str, int]]:
    """JFK's speech through a session with server VAD, in half-second appends; a session
    update (a new prompt, the same rules) is sent ``update_at_s`` into it."""
    speech = (decode(JFK, 30.0) * 32767).astype("<i2").tobytes()
    step = 8000 * 2  # half a second of 16 kHz PCM16
    config = dataclasses.replace(MANUAL, turn_detection=TurnDetection())

    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        for at in range(0, len(speech), step):
            wall.now += 0.5
            await session.append(speech[at : at + step])
            if update_at_s is not None and at == int(update_at_s * 2) * step:
                options = TranscriptionOptions(prompt="Americans")
                session.configure(dataclasses.replace(config, options=options))
        await session.append(pcm(1.0))

    _, events = run(body, config=config, limits=dataclasses.replace(PATIENT, interim_s=100.0))
    return [
        (e["type"].rsplit(".", 1)[-1], e.get("audio_start_ms", e.get("audio_end_ms", -1)))
        for e in events
        if e["type"].startswith("input_audio_buffer.speech")
    ]


def test_a_session_update_in_an_open_turn_keeps_the_vad_and_its_clock() -> None:
    """Before, an update made a new VAD: its clock began again at 0 and it did not know a
    turn was open, so the speech after the update opened a second turn, its times counted
    from the update."""
    plain = vad_edges(None)
    assert plain[0][0] == "speech_started" and len(plain) >= 4  # JFK pauses between phrases
    opened = plain[0][1] / 1000 + 1.0  # a second into the first turn
    assert vad_edges(opened) == plain


def test_a_long_turn_is_decoded_less_often_as_it_grows() -> None:
    """Each interim decodes the whole turn: at one a second, 20 s of speech cost 210 s of
    decoded audio (issue 42). With interim_growth 0.25 a turn waits for a quarter of its
    length of new audio once that is over a second."""

    async def body(session: LiveSession, engine: FakeEngine, s: Scheduler, wall: Wall) -> None:
        for second in range(20):
            wall.now = second + 1.0
            await session.append(pcm(1.0))
            await session.drain()  # each interim runs before the next second arrives

    limits = dataclasses.replace(PATIENT, interim_s=1.0, interim_growth=0.25)
    engine, _ = run(body, limits)
    decoded = [window for batch in engine.batches for window in batch]
    assert decoded == [1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 11.0, 15.0, 20.0]
    assert sum(decoded) / 20 == 3.5  # decoded audio per second of speech: at most 1 / 0.25
    before, _ = run(body, dataclasses.replace(limits, interim_growth=0.0))
    assert sum(window for batch in before.batches for window in batch) == 210.0
