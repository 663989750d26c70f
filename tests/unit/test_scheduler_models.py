"""Several models on one device pool, language detection as batched work, and idle
unloading: the scheduler with fake engines and a manual clock."""

from __future__ import annotations

import asyncio

import numpy as np

from asrserve.batcher.clock import ManualClock
from asrserve.batcher.device import Device
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.speakers.models import SpeakerModel
from asrserve.vocabulary import Priority, TranscriptionOptions
from tests.support.fakes import FakeEngine, chunk
from tests.support.loop import run_scheduler as run


def pair(name: str) -> tuple[FakeEngine, FakeEngine, Device]:
    """A device with a replica of model "a" (the default) and one of model "b"."""
    a, b = FakeEngine(model_id="a"), FakeEngine(model_id="b", language="de")
    return a, b, Device.of(name, a, b)


def test_a_batch_never_mixes_models_and_each_runs_on_its_own_replica() -> None:
    a, b, device = pair("0")

    async def body(s: Scheduler, clock: ManualClock) -> None:
        a.gate.clear()  # hold the device so that everything below is pending together
        first = s.submit_chunks("j0", 1, TranscriptionOptions(model="a"), [chunk(1.0)])
        assert await asyncio.to_thread(a.entered.wait, 5)
        on_a = s.submit_chunks("j1", 1, TranscriptionOptions(model="a"), [chunk(2.0)] * 2)
        on_b = s.submit_chunks("j2", 1, TranscriptionOptions(model="b"), [chunk(3.0)] * 3)
        on_default = s.submit_chunks("j3", 1, TranscriptionOptions(), [chunk(4.0)])
        a.gate.set()
        await asyncio.gather(*first, *on_a, *on_b, *on_default)

    run(SchedulerConfig("greedy", max_batch_size=8), [device], body)
    # "" (a job stored before models had ids) means the default model, so it batches apart
    # from "a" by its key but runs on a's replica.
    assert sorted(map(sorted, a.batches)) == [[1.0], [2.0, 2.0], [4.0]]
    assert b.batches == [[3.0, 3.0, 3.0]]


def test_an_idle_device_takes_whichever_models_work_is_pending() -> None:
    """Two devices, all the work for one model: both devices run it."""
    a0, _, dev0 = pair("0")
    a1, _, dev1 = pair("1")

    async def body(s: Scheduler, clock: ManualClock) -> None:
        a0.gate.clear()
        first = s.submit_chunks("j0", 1, TranscriptionOptions(model="a"), [chunk(1.0)])
        assert await asyncio.to_thread(a0.entered.wait, 5)
        second = s.submit_chunks("j1", 1, TranscriptionOptions(model="a"), [chunk(2.0)])
        await asyncio.gather(*second)  # device 1 ran it while device 0 is held
        a0.gate.set()
        await asyncio.gather(*first)

    run(SchedulerConfig("greedy", max_batch_size=8), [dev0, dev1], body)
    assert (a0.batches, a1.batches) == ([[1.0]], [[2.0]])


def test_detections_of_several_jobs_share_one_batch_apart_from_decoding() -> None:
    a, b, device = pair("0")

    async def body(s: Scheduler, clock: ManualClock) -> None:
        b.gate.clear()
        held = s.submit_chunks("j0", 1, TranscriptionOptions(model="b"), [chunk(1.0)])
        assert await asyncio.to_thread(b.entered.wait, 5)
        detections = [
            s.submit_detect(f"j{n}", Priority.ASYNC, "b", chunk(30.0)) for n in range(1, 4)
        ]
        decoding = s.submit_chunks("j4", 1, TranscriptionOptions(model="b"), [chunk(2.0)])
        b.gate.set()
        assert await asyncio.gather(*detections) == [("de", 0.9)] * 3
        await asyncio.gather(*held, *decoding)

    run(SchedulerConfig("greedy", max_batch_size=8), [device], body)
    assert b.detections == [3]  # one encoder pass for the three jobs
    assert b.batches == [[1.0], [2.0]]
    assert a.detections == []


def test_detections_reach_the_engine_with_their_languages_and_batch_by_them() -> None:
    """A tenant's list goes with its detection to the engine; detections among different
    lists are different encoder passes (the same list shares one)."""
    _, b, device = pair("0")

    async def body(s: Scheduler, clock: ManualClock) -> None:
        b.gate.clear()
        held = s.submit_chunks("j0", 1, TranscriptionOptions(model="b"), [chunk(1.0)])
        assert await asyncio.to_thread(b.entered.wait, 5)
        among = ("de", "fr")
        listed = [
            s.submit_detect(f"j{n}", Priority.ASYNC, "b", chunk(30.0), among=among) for n in (1, 2)
        ]
        anything = s.submit_detect("j3", Priority.ASYNC, "b", chunk(30.0))
        b.gate.set()
        await asyncio.gather(*held, *listed, anything)

    run(SchedulerConfig("greedy", max_batch_size=8), [device], body)
    assert sorted(zip(b.restrictions, b.detections, strict=True)) == [((), 1), (("de", "fr"), 2)]


def test_an_idle_model_releases_its_weights_and_reloads_for_the_next_batch() -> None:
    a, b, device = pair("0")
    config = SchedulerConfig("greedy", max_batch_size=8, model_idle=60.0)

    async def body(s: Scheduler, clock: ManualClock) -> None:
        await asyncio.gather(
            *s.submit_chunks("j0", 1, TranscriptionOptions(model="a"), [chunk(1.0)])
        )
        clock.advance(30.0)
        await asyncio.gather(
            *s.submit_chunks("j1", 1, TranscriptionOptions(model="b"), [chunk(2.0)])
        )
        clock.advance(31.0)  # a: 61 s idle, b: 31 s
        assert await asyncio.to_thread(a.unloaded.wait, 5)
        assert b.loaded
        await asyncio.gather(
            *s.submit_chunks("j2", 1, TranscriptionOptions(model="a"), [chunk(3.0)])
        )
        assert (a.loaded, a.loads) == (True, 1)

    run(config, [device], body)
    assert a.batches == [[1.0], [3.0]] and b.loads == 0


class Voices(SpeakerModel):
    """A speaker model that records its batches (each clip's frames) and answers each
    clip's first feature as its embedding."""

    name = "voices"
    dimension = 2

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def require(self) -> None:
        return None

    def embed(self, banks: np.ndarray) -> np.ndarray:
        self.batches.append([len(bank) for bank in banks])
        return banks[:, 0, :2].copy()

    def segment(self, chunks: np.ndarray) -> np.ndarray:
        self.batches.append([len(chunk) for chunk in chunks])
        return np.zeros((len(chunks), 589, 3), dtype=bool)


def test_speaker_clips_of_several_jobs_batch_by_length_apart_from_decoding() -> None:
    a, _, _ = pair("0")
    voices = Voices()
    device = Device("0", {"a": a}, voices)

    def clip(frames: int, value: float) -> np.ndarray:
        return np.full((frames, 80), value, dtype=np.float32)

    async def body(s: Scheduler, clock: ManualClock) -> None:
        a.gate.clear()
        held = s.submit_chunks("j0", 1, TranscriptionOptions(model="a"), [chunk(1.0)])
        assert await asyncio.to_thread(a.entered.wait, 5)
        first = s.submit_embed("j1", 1, [clip(148, 1.0), clip(148, 2.0), clip(90, 3.0)])
        second = s.submit_embed("j2", 1, [clip(148, 4.0)])
        a.gate.set()
        found = await asyncio.gather(*first, *second)
        assert [float(e[0]) for e in found] == [1.0, 2.0, 3.0, 4.0]
        await asyncio.gather(*held)

    run(SchedulerConfig("greedy", max_batch_size=8), [device], body)
    assert sorted(voices.batches) == [[90], [148, 148, 148]]  # one pass for both jobs' 1.5 s clips
    assert a.batches == [[1.0]]
