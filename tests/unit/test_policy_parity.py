"""The scheduler and the ``asrserve tune`` simulator batch alike: one fixed arrival list,
the scheduler on a manual clock with a device that takes exactly ``COST`` s per batch, the
simulator on virtual time with a latency model of ``COST`` s per batch."""

from __future__ import annotations

import asyncio
import queue
import random
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from asrserve.batcher.clock import ManualClock
from asrserve.batcher.device import Device
from asrserve.batcher.policies import POLICIES
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.engine.base import (
    NEVER,
    SAMPLING_RATE,
    Capabilities,
    ChunkInput,
    Engine,
    Pause,
    RawSegment,
    Settled,
    unheard,
)
from asrserve.transcript import Transcript
from asrserve.tune.chunks import DEFAULT_WINDOWS, Item, chunk_durations, window_frames
from asrserve.tune.model import LatencyModel
from asrserve.tune.simulator import Request, Setting, SimulatedService, simulate
from asrserve.vocabulary import Priority, TranscriptionOptions
from tests.support.fakes import FAKE_CAPABILITIES

COST = 0.37  # seconds per batch (and per whole file), whatever its size
MAX_BATCH, MAX_WAIT, HOLDOFF = 4, 0.05, 0.2
Batch = tuple[float, list[tuple[int, float]]]  # (start time, (request, audio seconds) each)


def arrivals() -> list[Request]:
    """Bursts of online and offline requests of one to three chunks, within 30 s (aging
    is not exercised: the scheduler re-checks it on extra wake-ups the simulator lacks)."""
    rng = random.Random(7)
    now, requests = 0.0, []
    classes = (Priority.INTERACTIVE, Priority.ASYNC, Priority.OFFLINE)
    for _ in range(24):
        now += rng.expovariate(3.0)
        requests.append(Request(now, round(rng.uniform(1.0, 70.0), 3), rng.choice(classes)))
    return requests


class StepEngine(Engine):
    """Each call waits until the test, having moved the clock by ``COST``, releases it."""

    model_id = "step"
    multilingual = False

    def __init__(self) -> None:
        self.calls: queue.Queue[tuple[list[Any], threading.Event]] = queue.Queue()

    @property
    def capabilities(self) -> Capabilities:
        return FAKE_CAPABILITIES

    def features(self, audio: np.ndarray, frames: int = 3000) -> np.ndarray:
        return np.zeros((80, frames), dtype=np.float32)

    def transcribe_batch(
        self,
        chunks: Sequence[ChunkInput],
        options: TranscriptionOptions,
        settled: Settled = unheard,
        pause: Pause = NEVER,
    ) -> list[list[RawSegment]]:
        self._call(list(chunks))
        return [[] for _ in chunks]

    def transcribe(self, audio: np.ndarray, options: TranscriptionOptions) -> Transcript:
        self._call([audio])
        return Transcript(language="en", duration=audio.shape[0] / SAMPLING_RATE, segments=[])

    def detect_language(
        self, features: Sequence[np.ndarray], among: Sequence[str] = ()
    ) -> list[tuple[str, float]]:
        self._call(list(features))
        return [("en", 1.0) for _ in features]

    @property
    def loaded(self) -> bool:
        return True  # never unloaded here: no model_idle

    def unload(self) -> None:
        raise AssertionError("the parity test sets no model_idle")

    def load(self) -> None:
        raise AssertionError("the parity test sets no model_idle")

    def _call(self, inputs: list[Any]) -> None:
        release = threading.Event()
        self.calls.put((inputs, release))
        assert release.wait(10)


async def settle() -> None:
    """Let the device loop react to what the test just did (no time passes)."""
    for _ in range(20):
        await asyncio.sleep(0)


class Replay:
    """Drives a scheduler through ``requests``: arrivals, timers and batch completions
    happen in time order, each at its exact time."""

    def __init__(self, policy: str, requests: list[Request]) -> None:
        self.requests = requests
        self.clock = ManualClock()
        self.engine = StepEngine()
        config = SchedulerConfig(
            policy,
            max_batch_size=MAX_BATCH,
            max_wait=MAX_WAIT,
            offline_priority=Priority.OFFLINE,
            offline_holdoff=HOLDOFF,
            background_from=Priority.ASYNC,
            background_batch_s=SimulatedService().background_batch_s,
        )
        self.scheduler = Scheduler([Device.of("0", self.engine)], config, clock=self.clock)
        self.taken = 0
        self.scheduler.on_taken(self._on_taken)
        self.labels: dict[int, tuple[int, float]] = {}  # id(chunk or audio) -> (request, s)
        self.futures: dict[int, asyncio.Future[Any]] = {}
        self.batches: list[Batch] = []

    def _on_taken(self) -> None:
        self.taken += 1

    async def run(self) -> list[Batch]:
        loops = asyncio.create_task(self.scheduler.run())
        try:
            await self._replay()
        finally:
            loops.cancel()
            await asyncio.gather(loops, return_exceptions=True)
            self.scheduler.close()
        return self.batches

    async def _replay(self) -> None:
        upcoming = list(enumerate(self.requests))
        running: tuple[float, list[Any], threading.Event] | None = None
        while upcoming or running is not None or self.taken or self.scheduler.pending_count():
            await settle()
            if running is None and self.taken:
                self.taken = 0
                inputs, release = await asyncio.to_thread(self.engine.calls.get, True, 5)
                labels = [self.labels[id(value)] for value in inputs]
                self.batches.append((self.clock.now(), labels))
                running = (self.clock.now() + COST, inputs, release)
            times = [self.clock.next_timer(), running[0] if running else None]
            times.append(upcoming[0][1].arrival if upcoming else None)
            now = min(t for t in times if t is not None)
            self.clock.advance_to(now)
            while upcoming and upcoming[0][1].arrival == now:
                self._submit(*upcoming.pop(0))
            if running is not None and running[0] == now:
                running[2].set()
                await asyncio.gather(*(self.futures[id(value)] for value in running[1]))
                running = None

    def _submit(self, index: int, request: Request) -> None:
        options = TranscriptionOptions()
        if self.scheduler.policy.whole_files:
            audio = np.zeros(round(request.duration * SAMPLING_RATE), dtype=np.float32)
            self.labels[id(audio)] = (index, request.duration)
            future = self.scheduler.submit_whole(str(index), request.priority, options, audio)
            self.futures[id(audio)] = future
            return
        pieces = chunk_durations(request.duration)
        chunks = [
            ChunkInput(np.zeros((1, window_frames(piece, DEFAULT_WINDOWS)), np.float32), 0, piece)
            for piece in pieces
        ]
        for piece, chunk in zip(pieces, chunks, strict=True):
            self.labels[id(chunk)] = (index, piece)
        futures = self.scheduler.submit_chunks(str(index), request.priority, options, chunks)
        self.futures.update(zip(map(id, chunks), futures, strict=True))


def simulated(policy: str, requests: list[Request]) -> list[Batch]:
    batches: list[Batch] = []

    def on_batch(start: float, items: list[Item]) -> None:
        batches.append((start, [(item.job, item.duration) for item in items]))

    model = LatencyModel(a=0.0, b=0.0, c=COST, whole_b=0.0, whole_c=COST)
    service = SimulatedService(offline_holdoff=HOLDOFF, prefetch=100, offline_prefetch=100)
    simulate(requests, Setting(policy, MAX_BATCH, MAX_WAIT * 1000), model, service, on_batch)
    return batches


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_the_simulator_picks_the_batches_the_scheduler_picks(policy: str) -> None:
    requests = arrivals()
    expected = asyncio.run(Replay(policy, requests).run())
    assert simulated(policy, requests) == expected
