"""A discrete-event simulation of the service: claim, preprocess, batch, run.

It follows ``worker.py``, ``batching/scheduler.py`` and ``batching/policies.py``. A request
is claimed from the queue (priority, then arrival) while fewer than ``prefetch`` jobs are
in flight; after its preprocessing time (the model's overhead) it is cut into ≤30 s
chunks (a clip of up to 30 s is one chunk), each padded to its encoder window bucket;
only chunks of one window share a batch. An idle device takes a batch at once
(``greedy``), or once ``max_wait`` has passed since the oldest pending chunk arrived
unless a full batch of its window waits (``window``); ``none`` runs whole files one at a
time. Batch selection (aging, priority, fairness, length) is :mod:`asrserve.tune.select`.
Pure Python and deterministic: the same inputs give the same result.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asrserve.batcher.scheduler import WINDOW_FRAMES
from asrserve.tune.model import LatencyModel
from asrserve.tune.select import (
    CHUNK_S,
    DEFAULT_WINDOWS,
    Item,
    Pending,
    chunk_durations,
    window_frames,
)


@dataclass(frozen=True)
class Request:
    arrival: float  # seconds
    duration: float  # audio seconds
    priority: int = 0  # interactive


@dataclass(frozen=True)
class Setting:
    policy: str  # greedy, window or none
    max_batch_size: int = 16
    max_wait_ms: float = 20.0

    def label(self) -> str:
        if self.policy == "none":
            return "none"
        wait = f" wait {self.max_wait_ms:g} ms" if self.policy == "window" else ""
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


ARRIVE, ENQUEUE, DONE, TIMER = 0, 1, 2, 3  # event kinds, in this order at equal times


def simulate(
    requests: Sequence[Request],
    setting: Setting,
    model: LatencyModel,
    devices: int = 1,
    windows: Sequence[float] = DEFAULT_WINDOWS,
    max_age: float = 30.0,
    prefetch: int = 32,
) -> Outcome:
    """Run ``requests`` through ``devices`` devices under ``setting``."""
    run = _Run(requests, setting, model, devices, windows, max_age, prefetch)
    for index, request in enumerate(requests):
        run.push(request.arrival, ARRIVE, index)
    while run.events:
        now, kind, _, payload = heapq.heappop(run.events)
        if kind == ARRIVE:
            heapq.heappush(run.queued, (requests[payload].priority, now, payload))
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
        devices: int,
        windows: Sequence[float],
        max_age: float,
        prefetch: int,
    ) -> None:
        self.requests, self.setting, self.model = requests, setting, model
        self.windows, self.max_age, self.prefetch = windows, max_age, prefetch
        self.whole = setting.policy == "none"
        self.limit = 1 if self.whole else setting.max_batch_size
        self.events: list[tuple[float, int, int, int]] = []  # (time, kind, tie, payload)
        self.tie = 0
        self.queued: list[tuple[int, float, int]] = []  # the durable queue: not yet claimed
        self.in_flight = 0
        self.pending = Pending()
        self.idle = list(range(devices))
        self.running: dict[int, list[Item]] = {}
        self.left = [0] * len(requests)
        self.finished = [0.0] * len(requests)
        self.batch_sizes: list[int] = []
        self.timer_at = math.inf

    def push(self, at: float, kind: int, payload: int) -> None:
        heapq.heappush(self.events, (at, kind, self.tie, payload))
        self.tie += 1

    def claim(self, now: float) -> None:
        """The worker's claim loop: up to ``prefetch`` jobs in flight, then preprocessing."""
        while self.queued and self.in_flight < self.prefetch:
            _, _, index = heapq.heappop(self.queued)
            self.in_flight += 1
            self.push(now + self.model.pre(self.requests[index].duration), ENQUEUE, index)

    def enqueue(self, now: float, index: int) -> None:
        req = self.requests[index]
        pieces = [req.duration] if self.whole else chunk_durations(req.duration)
        self.left[index] = len(pieces)
        for piece in pieces:
            if self.whole:
                window = WINDOW_FRAMES * max(1, math.ceil(piece / CHUNK_S))
            else:
                window = window_frames(piece, self.windows)
            self.pending.add(index, req.priority, piece, window, now)

    def done(self, now: float, device: int) -> None:
        self.idle.append(device)
        self.idle.sort()
        for item in self.running.pop(device):
            self.left[item.job] -= 1
            if self.left[item.job] == 0:
                self.finished[item.job] = now
                self.in_flight -= 1

    def dispatch(self, now: float) -> None:
        """Give idle devices their next batch, as their device loops would ask for it."""
        while self.idle and self.pending:
            if self.setting.policy == "window":
                setting = self.setting
                ready = self.pending.window_ready(now, setting.max_batch_size, setting.max_wait_ms)
                if ready > now:
                    if ready < self.timer_at:
                        self.timer_at = ready
                        self.push(ready, TIMER, -1)
                    return
            batch = self.pending.take(now, self.limit, self.max_age)
            device = self.idle.pop(0)
            audio = sum(item.duration for item in batch)
            cost = self.model.whole(audio) if self.whole else self.model.batch(len(batch), audio)
            self.running[device] = batch
            self.batch_sizes.append(len(batch))
            self.push(now + cost, DONE, device)
