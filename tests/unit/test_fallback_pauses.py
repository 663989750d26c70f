"""A batch gives its device up between fallback passes (``batcher/yielding.py``): to a
better class, or to a key with less recent device time, on a fake engine whose 9 s windows
loop, with a manual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from asrserve.batcher.clock import ManualClock
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.engine.base import NEVER, ChunkInput, Pause, RawSegment, Settled, unheard
from asrserve.engine.fallback import TEMPERATURES, Attempt, decode_all
from asrserve.vocabulary import Priority, TranscriptionOptions
from tests.support.fakes import FakeEngine, chunk
from tests.support.loop import busy, run_on_engine, settle

OPTS = TranscriptionOptions()


LOOP = " go home go home go home go home"


class LoopingEngine(FakeEngine):
    """Windows of 9 s loop at temperatures 0 and 0.2 and pass at 0.4 (a looping file's
    fallback); others pass at once. Each fallback pass is one entry of ``batches``."""

    def transcribe_batch(
        self,
        chunks: Sequence[ChunkInput],
        options: TranscriptionOptions,
        settled: Settled = unheard,
        pause: Pause = NEVER,
    ) -> list[list[RawSegment]]:
        return decode_all(chunks, TEMPERATURES, self._pass, lambda c: None, None, settled, pause)

    def _pass(self, chunks: list[ChunkInput], temperature: float) -> list[Attempt]:
        [segments] = [super().transcribe_batch(chunks, OPTS)]
        loops = [c.duration == 9.0 and temperature < 0.4 for c in chunks]
        return [
            Attempt([replace(s[0], text=LOOP if loop else s[0].text)], temperature)
            for s, loop in zip(segments, loops, strict=True)
        ]


def fallback_passes(
    other_tenant: str, other_priority: int, other_used: float = 0.0
) -> list[list[float]]:
    """The passes run when a 9 s window of tenant a loops (its first pass takes 5 s), and
    another window (of ``other_tenant`` at ``other_priority``, which took ``other_used``
    device seconds just before) arrives during that first pass."""

    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        if other_used:
            s.shares.charge([other_tenant], [1], other_used, clock.now())
        engine.gate.clear()
        looping = s.submit_chunks("job_a", Priority.ASYNC, OPTS, [chunk(9.0)], tenant="a")
        await busy(engine)
        clock.advance(5.0)  # the first pass's device time, charged to a when it ends
        other = s.submit_chunks("job_b", other_priority, OPTS, [chunk(1.0)], tenant=other_tenant)
        await settle()
        engine.gate.set()
        [kept] = await asyncio.gather(*looping)
        assert [(seg.text, seg.temperature) for seg in kept] == [(" 9.0", 0.4)]
        await asyncio.gather(*other)

    return run_on_engine(SchedulerConfig("greedy", max_batch_size=1), body, LoopingEngine()).batches


def test_a_looping_window_gives_the_device_up_to_another_tenant_between_fallback_passes() -> None:
    """Issue 42: a looping file held the device for all its fallback passes at once."""
    assert fallback_passes("b", Priority.ASYNC) == [[9.0], [1.0], [9.0], [9.0]]


def test_a_looping_window_gives_the_device_up_to_a_better_class_of_its_own_tenant() -> None:
    assert fallback_passes("a", Priority.INTERACTIVE) == [[9.0], [1.0], [9.0], [9.0]]


def test_a_window_resumed_between_fallback_passes_counts_its_audio_once() -> None:
    """Each pass of a resumed window is work for the device (the cost curves), but its audio
    left the backlog once: the measured throughput and device cost count it once."""
    audio: list[float] = []

    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        engine.gate.clear()
        looping = s.submit_chunks("job_a", Priority.ASYNC, OPTS, [chunk(9.0)], tenant="a")
        await busy(engine)
        other = s.submit_chunks("job_b", Priority.INTERACTIVE, OPTS, [chunk(1.0)], tenant="b")
        await settle()
        engine.gate.set()
        await asyncio.gather(*looping, *other)
        audio.append(s.stats.audio_seconds)

    config = SchedulerConfig("greedy", max_batch_size=1)
    engine = run_on_engine(config, body, LoopingEngine())
    assert engine.batches == [[9.0], [1.0], [9.0], [9.0]]  # a resumed after b's window
    assert audio == [10.0]


def test_a_looping_window_keeps_the_device_against_its_own_tenants_equal_work() -> None:
    assert fallback_passes("a", Priority.ASYNC) == [[9.0], [9.0], [9.0], [1.0]]


def test_a_looping_window_keeps_the_device_against_a_tenant_past_its_share() -> None:
    """b took 10 device seconds lately, a 5 (its own first pass): the fair queue would run
    a's window first, so a gives nothing up (yielding to every other key let a flooding
    key's windows hold an honest key's looping window back pass after pass)."""
    assert fallback_passes("b", Priority.ASYNC, other_used=10.0) == [[9.0], [9.0], [9.0], [1.0]]
