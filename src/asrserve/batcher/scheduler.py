"""The dynamic batcher: chunks from any job, stacked into one forward pass per device.

One device loop per device. A loop asks for its next batch only when its device is idle;
the policy (``policies/``: greedy, window, none) says when a batch is ready and which pending
items form it, and holds offline work off while online work is recent. Every served model has
a replica on every device, so an idle device takes the next batch of whichever model has
work, by the same rules; a batch never mixes models (the model is part of a batch's key).

The scheduler decides (which items form a batch, for which idle device, and what a finished
batch means for the queue, the shares and the cost model); ``executor.BatchExecutor`` runs
a batch, in each device's own single thread, off the event loop; the event loop only moves
futures.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import logging
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asrserve.batcher.clock import Clock, MonotonicClock
from asrserve.batcher.cost import MeasuredCost
from asrserve.batcher.curve import CostCurves
from asrserve.batcher.device import Device
from asrserve.batcher.executor import BatchExecutor
from asrserve.batcher.policies import PolicyConfig, get_policy
from asrserve.batcher.policies.fill import FILL_SHARE, RIDE_SHARE, ArrivalRate, Load
from asrserve.batcher.residency import Residency
from asrserve.batcher.shares import NOBODY, DeviceShares
from asrserve.batcher.stats import BatchRecord, SchedulerStats
from asrserve.batcher.work import SPEAKER_TASKS, WorkItem, as_frames
from asrserve.batcher.yielding import Paused
from asrserve.engine.base import (
    FRAMES_PER_SECOND,
    SAMPLING_RATE,
    ChunkInput,
    RawSegment,
)
from asrserve.errors import DeadlineExceeded
from asrserve.settings.keep_alive import FOREVER
from asrserve.vocabulary import Task, TranscriptionOptions

log = logging.getLogger(__name__)

SPEAKERS = "speakers"  # the model id of diarization's embedding passes
SEGMENTS = "segmentation"  # and of its segmentation passes
_NOT_WHISPER_WINDOWS = (Task.DETECT, *SPEAKER_TASKS)  # batches the latency model does not learn


@dataclass(frozen=True)
class SchedulerConfig:
    policy: str = "greedy"  # a name registered in ``policies.POLICIES``
    max_batch_size: int = 16
    max_wait: float = 0.02  # seconds; the ``window`` policy's wait after the head arrives
    max_age: float = 30.0  # seconds before a chunk jumps every priority and length rule
    # Offline work (see ``PolicyConfig``): classes from ``offline_priority`` on never age
    # ahead of online work and wait ``offline_holdoff`` s of online quiet.
    offline_priority: int | None = None
    offline_holdoff: float = 0.0
    # A batch that runs longer than ``run_timeout_factor`` times what the device's measured
    # speed predicts for its audio, and at least ``run_timeout_floor`` s, is a hang.
    run_timeout_floor: float = 300.0
    run_timeout_factor: float = 10.0
    # A model's replica on a device that has run no batch for ``model_idle`` s releases
    # its weights, and loads them again for the next batch (0: never): every model's
    # keep_alive unless ``keep_alive`` names its own (s, by model id; negative: forever).
    model_idle: float = 0.0
    keep_alive: Mapping[str, float] = field(default_factory=dict)
    fill_share: float = FILL_SHARE  # see PolicyConfig
    ride_share: float = RIDE_SHARE
    live_below: int | None = None
    live_batch_s: float = 0.0
    background_from: int | None = None  # see PolicyConfig
    background_batch_s: float = 0.0
    foreground_reserve: int = 0

    def policy_config(self) -> PolicyConfig:
        return PolicyConfig(
            max_batch_size=self.max_batch_size,
            max_wait=self.max_wait,
            max_age=self.max_age,
            offline_from=self.offline_priority,
            offline_holdoff=self.offline_holdoff,
            fill_share=self.fill_share,
            ride_share=self.ride_share,
            live_below=self.live_below,
            live_batch_s=self.live_batch_s,
            background_from=self.background_from,
            background_batch_s=self.background_batch_s,
            foreground_reserve=self.foreground_reserve,
        )


class Scheduler:
    def __init__(
        self,
        devices: Sequence[Device],
        config: SchedulerConfig,
        clock: Clock | None = None,
        on_batch: Callable[[BatchRecord], None] | None = None,
    ) -> None:
        if not devices:
            raise ValueError("the scheduler needs at least one device")
        self.devices = list(devices)
        self.config = config
        self.clock: Clock = clock or MonotonicClock()
        self.stats = SchedulerStats(devices=[d.name for d in devices])
        self._on_batch = on_batch
        self._pending: list[WorkItem] = []
        self._arrival = asyncio.Event()
        self._taken_listeners: list[Callable[[], None]] = []
        self._seq = itertools.count()
        self._pass_ids = itertools.count(1)
        self.policy = get_policy(config.policy, config.policy_config())
        self._online_seen = -math.inf  # when online work last arrived or last ran
        self._foreground_seen = -math.inf  # when work above the background classes did
        self._busy = 0  # devices computing a batch now
        self._arrivals = ArrivalRate()
        self.cost = MeasuredCost()  # of transcription batches, fitted as they run
        self.curves = CostCurves(config.max_batch_size)  # batch sizes that pay, by window
        self.shares = DeviceShares()  # each tenant's recent device time: fair queueing
        # runs what this decides: on a device's thread, within the hang bound
        self.executor = BatchExecutor(
            self.clock, self.run_timeout, lambda: self._pending, self._recent
        )
        idle = config.model_idle if config.model_idle > 0 else FOREVER
        # which models stay loaded (keep_alive), and an operator's load and unload
        self.residency = Residency(
            self.devices,
            self.clock,
            lambda model: self.pending_count(model=model),
            config.keep_alive,
            idle,
        )

    # --- producers ------------------------------------------------------------------
    def submit_chunks(
        self,
        job_id: str,
        priority: int,
        options: TranscriptionOptions,
        chunks: Sequence[ChunkInput],
        deadline: float | None = None,
        tenant: str = NOBODY,
    ) -> list[asyncio.Future[list[RawSegment]]]:
        """Whisper windows of one job, for ``tenant`` (an API key's id), whose share of the
        devices they count in."""
        return [
            self._add(job_id, priority, options, deadline, chunk=chunk, tenant=tenant)
            for chunk in chunks
        ]

    def submit_detect(
        self,
        job_id: str,
        priority: int,
        model: str,
        chunk: ChunkInput,
        deadline: float | None = None,
        among: tuple[str, ...] = (),
        tenant: str = NOBODY,
    ) -> asyncio.Future[tuple[str, float]]:
        """The spoken language of ``chunk`` (a full 30 s window), the most probable of
        ``among`` if it names some: encoder work that batches with other jobs' detections
        for the same model (and the same ``among``)."""
        options = TranscriptionOptions(model=model, task=Task.DETECT, languages=among)
        return self._add(job_id, priority, options, deadline, chunk=chunk, tenant=tenant)

    def submit_embed(
        self,
        job_id: str,
        priority: int,
        banks: Sequence[np.ndarray],
        deadline: float | None = None,
        tenant: str = NOBODY,
    ) -> list[asyncio.Future[np.ndarray]]:
        """A voice embedding of each clip's filterbank ((frames, 80), mean-normalised), run
        on a device's speaker model: clips of equal length batch together, across jobs."""
        options = TranscriptionOptions(model=SPEAKERS, task=Task.EMBED)
        return [
            self._add(job_id, priority, options, deadline, chunk=_clip(bank), tenant=tenant)
            for bank in banks
        ]

    def submit_segment(
        self,
        job_id: str,
        priority: int,
        chunks: Sequence[np.ndarray],
        deadline: float | None = None,
        tenant: str = NOBODY,
    ) -> list[asyncio.Future[np.ndarray]]:
        """Who of up to three local speakers speaks in each frame of each 10 s chunk (16 kHz
        samples), run on a device's speaker model: chunks batch together, across jobs."""
        options = TranscriptionOptions(model=SEGMENTS, task=Task.SEGMENT)
        return [
            self._add(job_id, priority, options, deadline, chunk=_samples(chunk), tenant=tenant)
            for chunk in chunks
        ]

    def submit_whole(
        self,
        job_id: str,
        priority: int,
        options: TranscriptionOptions,
        audio: np.ndarray,
        deadline: float | None = None,
        tenant: str = NOBODY,
    ) -> asyncio.Future[Any]:
        return self._add(job_id, priority, options, deadline, audio=audio, tenant=tenant)

    def _add(
        self,
        job_id: str,
        priority: int,
        options: TranscriptionOptions,
        deadline: float | None,
        *,
        chunk: ChunkInput | None = None,
        audio: np.ndarray | None = None,
        tenant: str = NOBODY,
    ) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        item = WorkItem(
            job_id=job_id,
            priority=priority,
            options=options,
            seq=next(self._seq),
            enqueued_at=self.clock.now(),
            future=future,
            chunk=chunk,
            audio=audio,
            deadline=deadline,
            model=self.devices[0].model_id(options.model),
            tenant=tenant,
        )
        self._arrivals.arrived(item.key, item.enqueued_at)
        if self.policy.is_online(item):
            self._online_seen = item.enqueued_at
        if not self.policy.is_background(item):
            self._foreground_seen = item.enqueued_at
        self._enqueue(item)
        return future

    def _enqueue(self, item: WorkItem) -> None:
        """``item`` waits in pending until a batch takes it or its caller gives up."""
        self._pending.append(item)
        item.future.add_done_callback(functools.partial(self._given_up, item))
        self.stats.queued(item.priority, item.duration, +1)
        self._arrival.set()

    # --- consumers ------------------------------------------------------------------
    async def run(self) -> None:
        """Run every device loop until cancelled."""
        async with asyncio.TaskGroup() as group:
            for device in self.devices:
                group.create_task(self._device_loop(device), name=f"device-loop-{device.name}")
            group.create_task(self.residency.run(), name="keep-alive")

    def close(self) -> None:
        for device in self.devices:
            device.executor.shutdown(wait=False, cancel_futures=True)

    async def _device_loop(self, device: Device) -> None:
        while True:
            batch = await self.next_batch(self.clock.now())
            self._busy += 1
            try:
                await self._execute(device, batch)
            finally:
                self._busy -= 1

    async def next_batch(self, idle_since: float = -math.inf) -> list[WorkItem]:
        """Wait for work the policy is willing to dispatch, then take it from pending
        (for a device idle since ``idle_since``)."""
        while True:
            self._arrival.clear()
            self._drop_dead()
            if not self._pending:
                await self._arrival.wait()
                continue
            idle, now = len(self.devices) - self._busy, self.clock.now()
            load = Load(
                busy=self._busy,
                idle_since=idle_since,
                arrivals=self._arrivals,
                cost=self.cost,
                idle=idle,
                foreground_seen=self._foreground_seen,
                sizes=self.curves,
                usage=self.shares.standing({item.tenant for item in self._pending}, now),
                about=self.shares.recent(now, self.policy.config.background_horizon),
            )
            batch = self.policy.dispatch(self._pending, now, self._online_seen, load)
            if not isinstance(batch, list):  # not yet: look again then, or on an arrival
                await self.clock.wait(self._arrival, batch)
                continue
            taken = set(map(id, batch))
            self._pending = [item for item in self._pending if id(item) not in taken]
            for item in batch:
                self.stats.queued(item.priority, item.duration, -1)
            self._signal_taken()
            if self._pending:  # another idle device may take what is left
                self._arrival.set()
            return batch

    def on_taken(self, listener: Callable[[], None]) -> None:
        """Called (on the event loop) whenever chunks leave pending: a batch was taken, or
        chunks whose caller gave up were dropped."""
        self._taken_listeners.append(listener)

    def _signal_taken(self) -> None:
        for listener in self._taken_listeners:
            listener()

    def _given_up(self, item: WorkItem, future: asyncio.Future[Any]) -> None:
        """A pending item whose caller cancelled it leaves the pending list at once."""
        if not future.cancelled() or item not in self._pending:
            return
        self._pending.remove(item)
        self.stats.dropped += 1
        self.stats.queued(item.priority, item.duration, -1)
        self._signal_taken()

    def _drop_dead(self) -> None:
        """Drop chunks whose caller gave up (cancelled) or whose deadline has passed."""
        now = self.clock.now()
        alive = []
        for item in self._pending:
            if item.future.done():
                self.stats.dropped += 1
            elif item.deadline is not None and now >= item.deadline:
                item.future.set_exception(
                    DeadlineExceeded("the request's deadline passed before it could run")
                )
                self.stats.dropped += 1
            else:
                alive.append(item)
                continue
            self.stats.queued(item.priority, item.duration, -1)
        if len(alive) < len(self._pending):
            self._signal_taken()
        self._pending = alive

    async def _execute(self, device: Device, batch: list[WorkItem]) -> None:
        started = self.clock.now()
        model = device.model_id(batch[0].options.model)
        device.last_used[model] = started
        device.running = model
        outputs = await self.executor.run(device, batch)
        finished = self.clock.now()
        device.last_used[model], device.running = finished, None
        self.residency.changed.set()  # its idle time counts from now
        self._arrival.set()  # a device is free and shares moved: a reserved device looks again
        self._ran(batch, finished)
        # Items are stacked padded to the widest window in the batch.
        window = max(item.window for item in batch)
        real = sum(min(item.frames[1], window) for item in batch)
        record = BatchRecord(
            device=device.name,
            size=len(batch),
            started=started,
            finished=finished,
            waits=[started - item.enqueued_at for item in batch],
            audio_seconds=sum(item.duration for item in batch),
            padded_frames=window * len(batch) - real,
            total_frames=window * len(batch),
            resumed_seconds=sum(item.duration - item.new_seconds for item in batch),
        )
        self.stats.record(record)
        self.shares.charge(
            [item.tenant for item in batch],
            [item.frames[0] for item in batch],
            record.compute,
            finished,
            [item.new_seconds for item in batch],
        )
        if batch[0].chunk is not None and batch[0].options.task not in _NOT_WHISPER_WINDOWS:
            self.cost.observe(record.size, record.audio_seconds, record.compute)
        self.curves.observe(batch[0].cost_key, record.size, record.audio_seconds, record.compute)
        pass_id = f"b{next(self._pass_ids)}"
        log.info(
            "batch",
            extra={
                "pass_id": pass_id,  # the forward pass
                "batch_id": pass_id,  # its older name, deprecated (docs/glossary.md)
                "device": device.name,
                "model": model,
                "task": batch[0].options.task.value,
                "size": record.size,
                "wait_ms": round(max(record.waits) * 1000, 1),
                "compute_ms": round(record.compute * 1000, 1),
                "audio_s": round(record.audio_seconds, 2),
                "padding": round(record.padded_frames / max(record.total_frames, 1), 3),
                "window_s": window / FRAMES_PER_SECOND,
                "jobs": sorted({item.job_id for item in batch}),
            },
        )
        if self._on_batch is not None:
            self._on_batch(record)
        for item, output in zip(batch, outputs, strict=True):
            if item.future.done():
                continue
            if isinstance(output, Paused):
                self._resume(item, output.chunk)
            elif isinstance(output, BaseException):
                item.future.set_exception(output)
            else:
                item.future.set_result(output)

    def _recent(self, tenant: str) -> float:
        return self.shares.used(tenant, self.clock.now())

    def _resume(self, item: WorkItem, chunk: ChunkInput) -> None:
        """A window paused between fallback passes waits again, as it was (its rank, its
        deadline, its caller's future), to resume at its next rung."""
        self._enqueue(dataclasses.replace(item, chunk=chunk))

    def _ran(self, batch: Sequence[WorkItem], finished: float) -> None:
        """What a finished batch tells the policy: online or foreground work just ran."""
        if any(self.policy.is_online(item) for item in batch):
            self._online_seen = finished
        if not all(self.policy.is_background(item) for item in batch):
            self._foreground_seen = finished
        if self.policy.is_online(batch[0]):
            self.stats.riders += sum(not self.policy.is_online(item) for item in batch)

    def run_timeout(self, batch: Sequence[WorkItem]) -> float:
        """How long ``batch`` may run before it counts as hung: ``run_timeout_factor`` times
        what the measured speed (audio seconds per busy device second) predicts, and at
        least ``run_timeout_floor``."""
        config = self.config
        throughput = self.stats.throughput()  # with every device busy
        if not throughput:
            return config.run_timeout_floor
        per_device = throughput / len(self.devices)
        expected = sum(item.duration for item in batch) / per_device
        return max(config.run_timeout_floor, config.run_timeout_factor * expected)

    def pending_count(
        self, priorities: Collection[int] | None = None, *, model: str | None = None
    ) -> int:
        """Pending items (of ``priorities``, of ``model``: all if None)."""
        items = self._pending
        if model is not None:
            default = self.devices[0].model_id("")
            items = [item for item in items if (item.options.model or default) == model]
        if priorities is None:
            return len(items)
        return sum(item.priority in priorities for item in items)

    def pending_by_window(self) -> dict[str, int]:
        """Pending chunks per encoder window (seconds): the length-bucket queues."""
        counts: dict[str, int] = {}
        for item in sorted(self._pending, key=lambda item: item.window):
            label = f"{item.window / FRAMES_PER_SECOND:g}s"
            counts[label] = counts.get(label, 0) + 1
        return counts


def _samples(chunk: np.ndarray) -> ChunkInput:
    """A segmentation chunk as a work item's input: its 10 ms frames are its window."""
    return ChunkInput(features=as_frames(chunk), offset=0.0, duration=len(chunk) / SAMPLING_RATE)


def _clip(bank: np.ndarray) -> ChunkInput:
    """A speaker clip as a work item's input: its frames are its window (its batch key)."""
    return ChunkInput(features=bank.T, offset=0.0, duration=len(bank) / FRAMES_PER_SECOND)
