"""The scheduler with a fake engine and a manual clock: deterministic, no real sleeps."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from asrserve.batcher.clock import ManualClock
from asrserve.batcher.device import Device, RunTimeout
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.batcher.stats import BatchRecord
from asrserve.batcher.work import WorkItem
from asrserve.engine.base import NEVER, ChunkInput, Pause, RawSegment, Settled, unheard
from asrserve.errors import DeadlineExceeded
from asrserve.vocabulary import Priority, TranscriptionOptions
from tests.support.fakes import FakeEngine, chunk
from tests.support.loop import busy, run_on_engine, run_scheduler, settle

OPTS = TranscriptionOptions()


def test_greedy_runs_a_lone_chunk_at_once() -> None:
    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        (future,) = s.submit_chunks("a", Priority.INTERACTIVE, OPTS, [chunk(5.0)])
        result = await future  # the clock never moves: no window is paid
        assert result[0].text == " 5.0"

    engine = run_on_engine(SchedulerConfig("greedy", max_batch_size=8, max_wait=1.0), body)
    assert engine.batches == [[5.0]]


def test_greedy_grows_the_batch_while_the_device_is_busy() -> None:
    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        engine.gate.clear()
        first = s.submit_chunks("a", 1, OPTS, [chunk(1.0)])
        await busy(engine)
        later = s.submit_chunks("b", 1, OPTS, [chunk(2.0), chunk(3.0), chunk(4.0)])
        await settle()
        engine.gate.set()
        await asyncio.gather(*first, *later)

    engine = run_on_engine(SchedulerConfig("greedy", max_batch_size=8), body)
    assert engine.batches == [[1.0], [2.0, 3.0, 4.0]]


def test_window_waits_for_the_window_then_dispatches() -> None:
    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        futures = s.submit_chunks("a", 1, OPTS, [chunk(1.0)])
        await settle()
        assert engine.batches == []  # waiting inside the window
        futures += s.submit_chunks("b", 1, OPTS, [chunk(2.0)])
        await settle()
        clock.advance(0.05)
        await asyncio.gather(*futures)

    engine = run_on_engine(SchedulerConfig("window", max_batch_size=8, max_wait=0.05), body)
    assert engine.batches == [[1.0, 2.0]]


def test_window_dispatches_a_full_batch_early() -> None:
    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        futures = s.submit_chunks("a", 1, OPTS, [chunk(float(n)) for n in range(1, 4)])
        await asyncio.gather(*futures)  # the clock never moves

    engine = run_on_engine(SchedulerConfig("window", max_batch_size=3, max_wait=10.0), body)
    assert engine.batches == [[1.0, 2.0, 3.0]]


def test_none_runs_whole_files_one_at_a_time() -> None:
    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        audio = np.zeros(16000, dtype=np.float32)
        futures = [s.submit_whole(f"j{n}", 1, OPTS, audio) for n in range(3)]
        results = await asyncio.gather(*futures)
        assert [r.duration for r in results] == [1.0, 1.0, 1.0]

    engine = run_on_engine(SchedulerConfig("none", max_batch_size=8), body)
    assert engine.wholes == 3 and engine.batches == []


def test_interactive_jumps_queued_async_work() -> None:
    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        engine.gate.clear()
        blocker = s.submit_chunks("x", 1, OPTS, [chunk(9.0)])
        await busy(engine)
        background = s.submit_chunks(
            "bg", Priority.OFFLINE, OPTS, [chunk(float(n)) for n in range(10, 14)]
        )
        urgent = s.submit_chunks("me", Priority.INTERACTIVE, OPTS, [chunk(1.0)])
        await settle()
        engine.gate.set()
        await asyncio.gather(*blocker, *background, *urgent)

    engine = run_on_engine(SchedulerConfig("greedy", max_batch_size=1), body)
    assert engine.batches[1] == [1.0]


def test_different_options_never_share_a_batch() -> None:
    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        engine.gate.clear()
        blocker = s.submit_chunks("x", 1, OPTS, [chunk(9.0)])
        await busy(engine)
        beam1 = TranscriptionOptions(beam_size=1)
        a = s.submit_chunks("a", 1, OPTS, [chunk(1.0)])
        b = s.submit_chunks("b", 1, beam1, [chunk(2.0)])
        await settle()
        engine.gate.set()
        await asyncio.gather(*blocker, *a, *b)

    engine = run_on_engine(SchedulerConfig("greedy", max_batch_size=8), body)
    assert engine.batches == [[9.0], [1.0], [2.0]]


def test_cancelled_and_expired_chunks_never_run() -> None:
    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        engine.gate.clear()
        blocker = s.submit_chunks("x", 1, OPTS, [chunk(9.0)])
        await busy(engine)
        (cancelled,) = s.submit_chunks("c", 1, OPTS, [chunk(1.0)])
        (expiring,) = s.submit_chunks("d", 1, OPTS, [chunk(2.0)], deadline=clock.now() + 1)
        (kept,) = s.submit_chunks("k", 1, OPTS, [chunk(3.0)])
        cancelled.cancel()
        clock.advance(2)
        engine.gate.set()
        await asyncio.gather(*blocker, kept)
        with pytest.raises(DeadlineExceeded):
            await expiring
        assert s.stats.dropped == 2

    engine = run_on_engine(SchedulerConfig("greedy", max_batch_size=8), body)
    assert engine.batches == [[9.0], [3.0]]


def test_a_poison_chunk_fails_alone() -> None:
    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        engine.gate.clear()
        blocker = s.submit_chunks("x", 1, OPTS, [chunk(9.0)])
        await busy(engine)
        good = s.submit_chunks("a", 1, OPTS, [chunk(1.0), chunk(2.0)])
        (bad,) = s.submit_chunks("b", 1, OPTS, [chunk(6.66)])
        await settle()
        engine.gate.set()
        await asyncio.gather(*blocker, *good)
        with pytest.raises(RuntimeError, match="poison"):
            await bad

    run_on_engine(SchedulerConfig("greedy", max_batch_size=8), body, FakeEngine(fail_on=6.66))


def test_stats_count_batches_and_queue() -> None:
    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        await asyncio.gather(*s.submit_chunks("a", 1, OPTS, [chunk(1.0), chunk(2.0)]))
        snap = s.stats.snapshot()
        assert snap["items"] == 2 and snap["audio_seconds"] == 3.0
        assert snap["queued_items"] == {"1": 0}

    run_on_engine(SchedulerConfig("greedy", max_batch_size=8), body)


def test_length_buckets_batch_apart_and_count_their_padding() -> None:
    def windowed(duration: float, frames: int) -> ChunkInput:
        return ChunkInput(np.zeros((1, frames), dtype=np.float32), 0.0, duration)

    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        engine.gate.clear()
        blocker = s.submit_chunks("x", 1, OPTS, [windowed(4.0, 500)])
        await busy(engine)
        rest = s.submit_chunks(
            "a", 1, OPTS, [windowed(3.0, 500), windowed(8.0, 1000), windowed(2.0, 500)]
        )
        await settle()
        assert s.pending_by_window() == {"5s": 2, "10s": 1}
        engine.gate.set()
        await asyncio.gather(*blocker, *rest)
        # Each batch is padded to its own bucket: 5 s (500 frames) or 10 s (1000 frames).
        assert (s.stats.total_frames, s.stats.padded_frames) == (2500, 100 + 500 + 200)

    engine = run_on_engine(SchedulerConfig("greedy", max_batch_size=8), body)
    assert engine.batches == [[4.0], [3.0, 2.0], [8.0]]


def test_offline_work_waits_for_online_quiet_and_yields_to_online_arrivals() -> None:
    config = SchedulerConfig(
        "greedy", max_batch_size=8, offline_priority=Priority.OFFLINE, offline_holdoff=0.2
    )

    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        await s.submit_chunks("online", Priority.INTERACTIVE, OPTS, [chunk(1.0)])[0]
        offline = s.submit_chunks("batch", Priority.OFFLINE, OPTS, [chunk(2.0)])
        await settle()
        assert engine.batches == [[1.0]]  # online work ran just now: the offline chunk waits
        clock.advance(0.1)
        again = s.submit_chunks("online2", Priority.INTERACTIVE, OPTS, [chunk(3.0)])
        await again[0]
        assert engine.batches == [[1.0], [3.0]]  # the next online request did not wait
        clock.advance(0.15)
        await settle()
        assert not offline[0].done()  # 0.15 s after the last online batch: still holding off
        clock.advance(0.06)
        await offline[0]
        assert engine.batches == [[1.0], [3.0], [2.0]]

    run_on_engine(config, body)


def test_offline_work_alone_starts_at_once() -> None:
    config = SchedulerConfig(offline_priority=Priority.OFFLINE, offline_holdoff=5.0)

    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        await asyncio.gather(*s.submit_chunks("batch", Priority.OFFLINE, OPTS, [chunk(1.0)]))

    assert run_on_engine(config, body).batches == [[1.0]]


def test_a_steady_online_client_slows_offline_work_but_cannot_stop_it() -> None:
    config = SchedulerConfig(max_age=1.0, offline_priority=Priority.OFFLINE, offline_holdoff=0.2)

    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        await s.submit_chunks("online", Priority.INTERACTIVE, OPTS, [chunk(1.0)])[0]
        offline = s.submit_chunks("batch", Priority.OFFLINE, OPTS, [chunk(9.0)])
        for step in range(10):  # an online request every 0.15 s: never 0.2 s of quiet
            clock.advance(0.15)
            await s.submit_chunks(f"online{step}", Priority.INTERACTIVE, OPTS, [chunk(1.0)])[0]
            if clock.now() < 1.0:
                await settle()
                assert not offline[0].done()  # online work keeps coming: held off
            else:  # held off for max_age at most (it runs in the device's thread)
                await asyncio.wait_for(offline[0], 5)
        assert engine.batches.count([9.0]) == 1

    run_on_engine(config, body)


class HangingEngine(FakeEngine):
    """Hangs on a 7.77 s chunk until released (as a wedged engine call would, forever)."""

    def __init__(self) -> None:
        super().__init__()
        self.hung = threading.Event()
        self.release = threading.Event()

    def transcribe_batch(
        self,
        chunks: Sequence[ChunkInput],
        options: TranscriptionOptions,
        settled: Settled = unheard,
        pause: Pause = NEVER,
    ) -> list[list[RawSegment]]:
        if any(abs(c.duration - 7.77) < 0.01 for c in chunks):
            self.hung.set()
            self.release.wait(10)
        return super().transcribe_batch(chunks, options, settled, pause)


class SettlingEngine(FakeEngine):
    """Tells a batch's first result early, then holds a batch of several until released: as
    the real engine does while the batch's other windows fall back to higher temperatures."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def transcribe_batch(
        self,
        chunks: Sequence[ChunkInput],
        options: TranscriptionOptions,
        settled: Settled = unheard,
        pause: Pause = NEVER,
    ) -> list[list[RawSegment]]:
        results = super().transcribe_batch(chunks, options, settled, pause)
        settled(0, results[0])
        if len(chunks) > 1:
            self.release.wait(10)
        return results


def test_a_chunk_settled_early_is_not_held_back_by_its_batch() -> None:
    engine = SettlingEngine()

    async def body(s: Scheduler, _: FakeEngine, clock: ManualClock) -> None:
        early, slow = s.submit_chunks("a", 1, OPTS, [chunk(1.0), chunk(2.0)])
        assert (await early)[0].text == " 1.0"
        assert not slow.done()
        engine.release.set()
        assert (await slow)[0].text == " 2.0"

    run_on_engine(SchedulerConfig("greedy", max_batch_size=8), body, engine)
    assert engine.batches == [[1.0, 2.0]]


def test_a_hung_batch_fails_its_chunks_and_the_device_goes_on() -> None:
    engine = HangingEngine()

    async def body(s: Scheduler, _: FakeEngine, clock: ManualClock) -> None:
        (hung,) = s.submit_chunks("h", 1, OPTS, [chunk(7.77)])
        assert await asyncio.to_thread(engine.hung.wait, 5)
        clock.advance(59)
        await settle()
        assert not hung.done()  # not yet: the floor is 60 s
        clock.advance(2)
        with pytest.raises(RunTimeout):
            await hung
        after = s.submit_chunks("ok", 1, OPTS, [chunk(1.0)])
        (segments,) = await asyncio.gather(*after)
        assert segments[0].text == " 1.0"
        assert not engine.release.is_set()  # it ran while the hung call is still stuck
        engine.release.set()

    run_on_engine(SchedulerConfig("greedy", max_batch_size=8, run_timeout_floor=60), body, engine)


def test_the_run_timeout_follows_the_measured_speed() -> None:
    config = SchedulerConfig(run_timeout_floor=20, run_timeout_factor=10)
    scheduler = Scheduler([Device.of("0", FakeEngine())], config)
    future: asyncio.Future[object] = asyncio.Future(loop=asyncio.new_event_loop())
    item = WorkItem("a", 1, OPTS, 0, 0.0, future, chunk=chunk(30.0))
    assert scheduler.run_timeout([item]) == 20  # nothing measured yet: the floor
    record = BatchRecord("0", 1, 0.0, 2.0, [0.0], 10.0, 0, 3000)  # 10 audio s in 2 s
    scheduler.stats.record(record)
    assert scheduler.run_timeout([item, item]) == pytest.approx(10 * 60 * 2 / 10)
    scheduler.close()
    future.get_loop().close()


def test_idle_devices_share_what_is_pending() -> None:
    """Four chunks for two idle devices: two each, side by side, not four on one device
    while the other stays idle."""
    first, second = FakeEngine(), FakeEngine()

    async def main() -> None:
        devices = [Device.of("0", first), Device.of("1", second)]
        scheduler = Scheduler(devices, SchedulerConfig("greedy", max_batch_size=8))
        loops = asyncio.create_task(scheduler.run())
        try:
            chunks = [chunk(5.0), chunk(5.1), chunk(5.2), chunk(5.3)]
            futures = scheduler.submit_chunks("a", Priority.INTERACTIVE, OPTS, chunks)
            await asyncio.wait_for(asyncio.gather(*futures), 10)
        finally:
            loops.cancel()
            await asyncio.gather(loops, return_exceptions=True)
            scheduler.close()

    asyncio.run(main())
    assert sorted(len(batch) for batch in first.batches + second.batches) == [2, 2]
    assert len(first.batches) == len(second.batches) == 1


def test_a_tenants_live_work_past_its_share_waits_behind_anothers_request() -> None:
    """Issue 42: key A's live interims (priority -1) went ahead of every key's requests.
    A's first window takes 5 s of the device: then B's request, though queued after A's
    next live window, runs first."""

    async def body(s: Scheduler, engine: FakeEngine, clock: ManualClock) -> None:
        engine.gate.clear()
        first = s.submit_chunks("sess_a", -1, OPTS, [chunk(1.0)], tenant="a")
        await busy(engine)
        clock.advance(5.0)  # the pass's device time, charged to a when it ends
        live = s.submit_chunks("sess_a", -1, OPTS, [chunk(2.0)], tenant="a")
        request = s.submit_chunks("job_b", Priority.INTERACTIVE, OPTS, [chunk(3.0)], tenant="b")
        await settle()
        engine.gate.set()
        await asyncio.gather(*first, *live, *request)

    config = SchedulerConfig("greedy", max_batch_size=1, live_below=Priority.INTERACTIVE)
    engine = run_on_engine(config, body)
    assert engine.batches == [[1.0], [3.0], [2.0]]


def test_a_tenant_past_its_share_keeps_off_the_reserved_device_while_another_is_about() -> None:
    """Issue 42: a looping key's passes held both devices, and an honest key's request
    waited for one to end. Two devices; b ran a pass lately, a far more: a's second window
    waits while its first runs, and b's request, arriving meanwhile, takes the free one."""
    first, second = FakeEngine(), FakeEngine()

    async def body(s: Scheduler, clock: ManualClock) -> None:
        s.shares.charge(["a", "b"], [1, 1], 10.0, clock.now())  # a: 5 s, b: 5 s
        s.shares.charge(["a"], [1], 20.0, clock.now())  # a: 25 s, past the mean (15)
        for engine in (first, second):
            engine.gate.clear()
        mine = s.submit_chunks("job_a", Priority.INTERACTIVE, OPTS, [chunk(1.0)], tenant="a")
        mine += s.submit_chunks("job_a", Priority.INTERACTIVE, OPTS, [chunk(2.0)], tenant="a")
        await settle()
        assert s.pending_count() == 1  # one of a's windows runs, the other is held
        theirs = s.submit_chunks("job_b", Priority.INTERACTIVE, OPTS, [chunk(3.0)], tenant="b")
        await settle()
        assert s.pending_count() == 1  # b's went to the free device; a's still waits
        for engine in (first, second):
            engine.gate.set()
        await asyncio.gather(*mine, *theirs)

    config = SchedulerConfig("greedy", max_batch_size=1, foreground_reserve=1)
    run_scheduler(config, [Device.of("0", first), Device.of("1", second)], body)
    assert sorted(first.batches + second.batches) == [[1.0], [2.0], [3.0]]
