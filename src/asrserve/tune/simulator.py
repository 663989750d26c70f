"""A discrete-event simulation of the service: claim, preprocess, batch, run.

It follows ``inference/consumer.py`` and ``batcher/scheduler.py``. A request is claimed from the
queue (priority, then arrival) by its lane: online requests while fewer than ``prefetch``
online jobs are in flight, Batch API (offline) ones within their own
``offline_prefetch``. After its preprocessing time (the model's overhead) it is cut into
≤30 s chunks (a clip of up to 30 s is one chunk), each padded to its encoder window
bucket; only chunks of one window share a batch. When an idle device takes a batch, and
which chunks form it, is decided by the scheduler's own policy objects
(:mod:`asrserve.batcher.policies`), on virtual time: the same readiness, selection
(aging, priority, fairness, length), offline class and offline hold-off.
Pure Python and deterministic: the same inputs give the same result.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from asrserve.batcher.cost import MeasuredCost
from asrserve.batcher.curve import CostCurves
from asrserve.batcher.policies import PolicyConfig, get_policy, policy_class
from asrserve.batcher.policies.base import foreground_reserve
from asrserve.batcher.policies.fill import ArrivalRate, Load
from asrserve.batcher.work import WINDOW_FRAMES
from asrserve.settings import SchedulerSettings
from asrserve.tune.chunks import CHUNK_S, DEFAULT_WINDOWS, Item, chunk_durations, window_frames
from asrserve.tune.model import LatencyModel
from asrserve.vocabulary import Priority


@dataclass(frozen=True)
class Request:
    arrival: float  # seconds
    duration: float  # audio seconds
    priority: int = Priority.INTERACTIVE  # Priority.OFFLINE: a Batch API item


@dataclass(frozen=True)
class Setting:
    policy: str  # a name registered in ``batcher.policies.POLICIES``
    max_batch_size: int = 16
    max_wait_ms: float = 20.0

    def label(self) -> str:
        kind = policy_class(self.policy)
        if kind.whole_files:
            return self.policy
        wait = f" wait {self.max_wait_ms:g} ms" if kind.uses_max_wait else ""
        return f"{self.policy} batch {self.max_batch_size}{wait}"


@dataclass(frozen=True)
class Outcome:
    setting: Setting
    latencies: list[float]  # per request, in the order given
    throughput: float  # audio seconds / wall seconds (first arrival to last completion)
    mean_batch: float
    batches: int

    def percentile(self, q: float) -> float:
        """numpy's linear interpolation between closest ranks; nan when empty."""
        return float(np.percentile(self.latencies, q)) if self.latencies else math.nan


def _default(name: str) -> Any:
    """A scheduler setting's default, as ``Settings`` has it (written once, there)."""
    return SchedulerSettings.model_fields[name].default


@dataclass(frozen=True)
class SimulatedService:
    """The service's settings that are not tuned: defaults as ``Settings`` has them."""

    devices: int = 1
    windows: Sequence[float] = DEFAULT_WINDOWS
    max_age: float = _default("max_queue_age_s")
    prefetch: int = _default("prefetch_jobs")  # online jobs in flight
    offline_prefetch: int = _default("batch_api_prefetch_jobs")  # Batch API items in flight
    offline_holdoff: float = _default("offline_holdoff_ms") / 1000
    background_batch_s: float = _default("background_batch_s")

    @classmethod
    def of(
        cls, settings: SchedulerSettings, devices: int, windows: Sequence[float]
    ) -> SimulatedService:
        """The service as ``settings`` configure it, on ``devices`` devices, its encoder
        windows ``windows`` (the engine settings')."""
        return cls(
            devices=devices,
            windows=windows,
            max_age=settings.max_queue_age_s,
            prefetch=settings.prefetch_jobs,
            offline_prefetch=settings.batch_api_prefetch_jobs,
            offline_holdoff=settings.offline_holdoff_ms / 1000,
            background_batch_s=settings.background_batch_s,
        )


ARRIVE, ENQUEUE, DONE, TIMER = 0, 1, 2, 3  # event kinds, in this order at equal times
OnBatch = Callable[[float, list[Item]], None]  # (start time, its chunks)


def simulate(
    requests: Sequence[Request],
    setting: Setting,
    model: LatencyModel,
    service: SimulatedService | None = None,
    on_batch: OnBatch | None = None,
) -> Outcome:
    """Run ``requests`` through ``service.devices`` devices under ``setting``;
    ``on_batch`` sees each batch as a device starts it."""
    run = _Run(requests, setting, model, service or SimulatedService(), on_batch)
    for index, request in enumerate(requests):
        run.push(request.arrival, ARRIVE, index)
    while run.events:
        now, kind, _, payload = heapq.heappop(run.events)
        if kind == ARRIVE:
            run.arrive(now, payload)
        elif kind == ENQUEUE:
            run.enqueue(now, payload)
        elif kind == DONE:
            run.done(now, payload)
        elif now >= run.timer_at:
            run.timer_at = math.inf
        run.claim(now)
        run.dispatch(now)
    latencies = [end - req.arrival for req, end in zip(requests, run.finished, strict=True)]
    start = min((req.arrival for req in requests), default=0.0)
    wall = max(run.finished, default=0.0) - start
    sizes = run.batch_sizes
    return Outcome(
        setting=setting,
        latencies=latencies,
        throughput=sum(req.duration for req in requests) / wall if wall > 0 else math.inf,
        mean_batch=sum(sizes) / len(sizes) if sizes else 0.0,
        batches=len(sizes),
    )


class _Run:
    def __init__(
        self,
        requests: Sequence[Request],
        setting: Setting,
        model: LatencyModel,
        service: SimulatedService,
        on_batch: OnBatch | None,
    ) -> None:
        self.requests, self.model, self.service = requests, model, service
        self.on_batch = on_batch
        self.policy = get_policy(
            setting.policy,
            PolicyConfig(
                max_batch_size=setting.max_batch_size,
                max_wait=setting.max_wait_ms / 1000,
                max_age=service.max_age,
                offline_from=Priority.OFFLINE,
                offline_holdoff=service.offline_holdoff,
                background_from=Priority.ASYNC,
                background_batch_s=service.background_batch_s,
                foreground_reserve=foreground_reserve(service.devices),
            ),
        )
        self.events: list[tuple[float, int, int, int]] = []  # (time, kind, tie, payload)
        self.tie = 0
        # The consumer's two claim lanes (online, offline): the durable queue of each, not
        # yet claimed, by (priority, arrival); jobs in flight; how many may be.
        self.queued: tuple[list[tuple[int, float, int]], ...] = ([], [])
        self.in_flight = [0, 0]
        self.capacity = (service.prefetch, service.offline_prefetch)
        self.pending: list[Item] = []  # in arrival order, as the scheduler keeps them
        self.seq = itertools.count()
        self.online_seen = -math.inf  # when online work last arrived or last ran
        self.foreground_seen = -math.inf  # when work above the background classes did
        self.idle = list(range(service.devices))
        self.idle_since = [0.0] * service.devices
        self.arrivals = ArrivalRate()
        self.cost = MeasuredCost()  # learnt from the batches as they finish, as the scheduler does
        self.curves = CostCurves(self.policy.max_batch_size)  # as the scheduler's are
        self.costs: dict[int, float] = {}  # device -> its running batch's time
        self.running: dict[int, list[Item]] = {}
        self.left = [0] * len(requests)
        self.finished = [0.0] * len(requests)
        self.batch_sizes: list[int] = []
        self.timer_at = math.inf

    def push(self, at: float, kind: int, payload: int) -> None:
        heapq.heappush(self.events, (at, kind, self.tie, payload))
        self.tie += 1

    def lane(self, index: int) -> int:
        return 0 if self.requests[index].priority < Priority.OFFLINE else 1

    def arrive(self, now: float, index: int) -> None:
        heapq.heappush(self.queued[self.lane(index)], (self.requests[index].priority, now, index))

    def claim(self, now: float) -> None:
        """Each lane's claim loop: up to its capacity in flight, then preprocessing."""
        for lane, queued in enumerate(self.queued):
            while queued and self.in_flight[lane] < self.capacity[lane]:
                _, _, index = heapq.heappop(queued)
                self.in_flight[lane] += 1
                self.push(now + self.model.pre(self.requests[index].duration), ENQUEUE, index)

    def enqueue(self, now: float, index: int) -> None:
        req = self.requests[index]
        whole = self.policy.whole_files
        pieces = [req.duration] if whole else chunk_durations(req.duration)
        self.left[index] = len(pieces)
        for piece in pieces:
            if whole:
                window = WINDOW_FRAMES * max(1, math.ceil(piece / CHUNK_S))
            else:
                window = window_frames(piece, self.service.windows)
            item = Item(index, req.priority, piece, window, next(self.seq), now)
            self.pending.append(item)
            self.arrivals.arrived(item.key, now)
            if self.policy.is_online(item):
                self.online_seen = now
            if not self.policy.is_background(item):
                self.foreground_seen = now

    def done(self, now: float, device: int) -> None:
        self.idle.append(device)
        self.idle_since[device] = now
        self.idle.sort()
        batch = self.running.pop(device)
        if not self.policy.whole_files:
            audio = sum(item.duration for item in batch)
            self.cost.observe(len(batch), audio, self.costs[device])
            self.curves.observe(batch[0].cost_key, len(batch), audio, self.costs[device])
        if any(self.policy.is_online(item) for item in batch):
            self.online_seen = now
        if not all(self.policy.is_background(item) for item in batch):
            self.foreground_seen = now
        for item in batch:
            self.left[item.job] -= 1
            if self.left[item.job] == 0:
                self.finished[item.job] = now
                self.in_flight[self.lane(item.job)] -= 1

    def dispatch(self, now: float) -> None:
        """Give idle devices their next batch, as their device loops would ask for it."""
        while self.idle and self.pending:
            since = self.idle_since[self.idle[0]]
            load = Load(
                busy=len(self.running),
                idle_since=since,
                arrivals=self.arrivals,
                cost=self.cost,
                idle=len(self.idle),
                foreground_seen=self.foreground_seen,
                sizes=self.curves,
            )
            batch = self.policy.dispatch(self.pending, now, self.online_seen, load)
            if not isinstance(batch, list):  # look again then (or on the next event)
                if batch < self.timer_at:
                    self.timer_at = batch
                    self.push(batch, TIMER, -1)
                return
            taken = set(map(id, batch))
            self.pending = [item for item in self.pending if id(item) not in taken]
            device = self.idle.pop(0)
            audio = sum(item.duration for item in batch)
            whole = self.policy.whole_files
            cost = self.model.whole(audio) if whole else self.model.batch(len(batch), audio)
            self.running[device] = batch
            self.costs[device] = cost
            self.batch_sizes.append(len(batch))
            if self.on_batch is not None:
                self.on_batch(now, batch)
            self.push(now + cost, DONE, device)
