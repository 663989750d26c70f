"""A running job's progress: only text whose every earlier window is done counts as final,
and the writer stores the latest report without queueing stale ones (real SQLite store)."""

from __future__ import annotations

import asyncio

from asrserve.audio.chunk import Timeline, restore
from asrserve.drivers.sqlite import Database
from asrserve.engine.base import SAMPLING_RATE, RawSegment
from asrserve.events.local import LocalEvents
from asrserve.inference.progress import ProgressWriter, WindowProgress
from asrserve.jobs.models import Job, Progress
from asrserve.jobs.sqlite import SqliteJobStore
from tests.support.fakes import raw_segment
from tests.support.loop import Run

# Three windows of a file with a pause between speech regions (removed from the windows).
SPEECH = [
    {"start": 0, "end": 20 * SAMPLING_RATE},
    {"start": 25 * SAMPLING_RATE, "end": 50 * SAMPLING_RATE},
    {"start": 60 * SAMPLING_RATE, "end": 70 * SAMPLING_RATE},
]
DURATIONS = [20.0, 25.0, 10.0]
DECODED = [
    [raw_segment(0.0, 9.0, " One."), raw_segment(9.0, 20.0, " Two.")],
    [raw_segment(20.0, 44.0, " Three.")],
    [raw_segment(45.0, 55.0, " Four.")],
]


def test_text_is_final_once_every_window_before_it_is_done(run: Run) -> None:
    reports: list[Progress] = []

    async def finish_out_of_order() -> None:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in DURATIONS]
        progress = WindowProgress(DURATIONS, Timeline(SPEECH, 75.0), reports.append)
        progress.watch(futures[:2])
        progress.watch(futures[2:])
        for index in (1, 2, 0):  # the first window finishes last
            futures[index].set_result(DECODED[index])
            await asyncio.sleep(0)  # let the done callbacks run, as the loop does

    run(finish_out_of_order())
    assert [(r.chunks_done, r.chunks_total) for r in reports] == [(0, 3), (3, 3)]
    assert reports[-1].audio_done_s == reports[-1].audio_total_s == 55.0
    whole = restore(DECODED, SPEECH, 75.0)  # what the finished transcript holds
    assert [(s.id, s.start, s.end, s.text) for s in reports[-1].segments] == [
        (s.id, s.start, s.end, s.text) for s in whole
    ]
    assert whole[2].start == 25.0  # back on the file's clock: after the first pause


def test_a_failed_window_stops_the_final_text_before_it(run: Run) -> None:
    reports: list[Progress] = []

    async def fail_the_second() -> None:
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[list[RawSegment]]] = [loop.create_future() for _ in DURATIONS]
        progress = WindowProgress(DURATIONS, Timeline(SPEECH, 75.0), reports.append)
        progress.watch(futures)
        futures[1].set_exception(RuntimeError("poison"))
        futures[0].set_result(DECODED[0])
        futures[2].set_result(DECODED[2])
        await asyncio.sleep(0)

    run(fail_the_second())
    assert [(r.chunks_done, len(r.segments)) for r in reports] == [(0, 0), (1, 2)]


def test_text_whose_times_reach_past_the_regions_known_waits_for_them(run: Run) -> None:
    """A file still being decoded: the first window's text ends where the regions known
    end, so it is placed once the next region is known, at the times the whole file's
    regions give it; the totals grow as windows become known."""
    reports: list[Progress] = []

    async def decode_in_stages() -> None:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in DURATIONS]
        timeline = Timeline(SPEECH[:1], 22.0, complete=False)
        progress = WindowProgress(DURATIONS[:1], timeline, reports.append)
        progress.watch(futures[:1])
        futures[0].set_result(DECODED[0])
        await asyncio.sleep(0)
        timeline.update(SPEECH[:2], 52.0, complete=False)
        progress.grow(DURATIONS[:2])
        progress.watch(futures[1:])
        timeline.update(SPEECH, 75.0)
        progress.grow(DURATIONS)
        for index in (1, 2):
            futures[index].set_result(DECODED[index])
        await asyncio.sleep(0)

    run(decode_in_stages())
    assert [(r.chunks_done, r.chunks_total) for r in reports] == [(0, 1), (1, 2), (1, 3), (3, 3)]
    whole = restore(DECODED, SPEECH, 75.0)
    assert [(s.id, s.start, s.end, s.text) for s in reports[-1].segments] == [
        (s.id, s.start, s.end, s.text) for s in whole
    ]


class HeldStore(SqliteJobStore):
    """The real store, whose progress writes wait at a gate and are counted."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.gate = asyncio.Event()
        self.writes: list[int] = []

    async def report(self, job_id: str, progress: Progress) -> Job | None:
        await self.gate.wait()
        self.writes.append(progress.chunks_done)
        return await super().report(job_id, progress)


def test_the_writer_stores_the_latest_report_and_nothing_after_close(
    database: Database, run: Run
) -> None:
    events = LocalEvents()

    async def scenario() -> tuple[list[int], Job | None]:
        store = HeldStore(database)
        await store.create(Job(id="job_1"))
        await store.start("job_1")
        writer = ProgressWriter(store, events, "job_1")
        with events.subscribe("job_1") as changed:
            for done in (1, 2, 3):  # 2 is replaced by 3 while 1 is being written
                writer(Progress(chunks_done=done, chunks_total=4))
                await asyncio.sleep(0)  # one loop turn: the write of 1 starts, and waits
            store.gate.set()
            async with asyncio.timeout(10):  # followers are woken after each write
                while store.writes != [1, 3]:
                    await changed.wait()
                    changed.clear()
            await writer.close()
            writer(Progress(chunks_done=4, chunks_total=4))  # after close: dropped
        return store.writes, await store.get("job_1")

    writes, job = run(scenario())
    assert writes == [1, 3]
    assert job is not None and job.progress is not None and job.progress.chunks_done == 3
