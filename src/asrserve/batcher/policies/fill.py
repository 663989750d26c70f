"""Keeping batches full: waiting briefly for one, and letting offline work ride in one.

A device that goes idle while others compute, with only a few chunks pending, can take a
small batch now or wait briefly for the next arrivals. The fitted batch cost
(``batcher/cost.py``) says which gives more audio per device second: a batch pays a
fixed cost per call that a fuller batch shares out, while waiting leaves the device idle.
The wait is bounded by ``FILL_SHARE`` of what the batch costs anyway, and a device never
waits when no other device is busy: a lone request on a quiet service runs at once.

Offline (Batch API) work may fill what online work leaves: chunks of the same key ride in
an online batch that has room while the batch cost says they add less than ``ride_share``
of that batch's time. Off by default (``RIDE_SHARE`` 0): on the 2-core CPU bench riders at
0.10 made Batch API progress 0 -> 16 audio s/s under a one-client loop but that client's
p95 7x longer (docs/benchmarks.md#batch-api-riders). Pure functions of what they are
given, so the scheduler and the simulator decide alike.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from asrserve.batcher.policies.selection import Pending

T = TypeVar("T", bound=Pending)

FILL_SHARE = 0.25  # the longest wait, as a share of the batch's own predicted time
FILL_GAIN = 1.05  # waiting must promise at least this much more audio per device second
STEPS = 8  # waits tried between 0 and the longest
RATE_HORIZON_S = 10.0  # arrivals older than this no longer count toward the rate
RATE_SAMPLES = 64  # arrivals kept per key
RIDE_SHARE = 0.0  # offline riders may add this much to an online batch's predicted time (off)
MAX_KEYS = 256  # keys tracked before the stale ones are dropped


class BatchCost(Protocol):
    def batch(self, size: float, audio_seconds: float) -> float: ...


class UnknownCost:
    """No batch has been measured yet: nothing to trade a wait against."""

    def batch(self, size: float, audio_seconds: float) -> float:
        return 0.0


UNKNOWN_COST = UnknownCost()


class BatchSizes(Protocol):
    def largest(self, key: Hashable | None, waiting: int) -> int: ...
    def pays(self, key: Hashable | None) -> int: ...


class NoLimit:
    """No cost curve: a batch is as large as the policy's limit allows."""

    def largest(self, key: Hashable | None, waiting: int) -> int:
        return 1 << 30

    def pays(self, key: Hashable | None) -> int:
        return 1 << 30


NO_LIMIT = NoLimit()


@dataclass
class ArrivalRate:
    """Recent arrivals per batch key (times on the caller's clock)."""

    times: dict[Hashable, deque[float]] = field(default_factory=dict)

    def arrived(self, key: Hashable, now: float) -> None:
        if key not in self.times and len(self.times) >= MAX_KEYS:
            self.times = {k: t for k, t in self.times.items() if now - t[-1] <= RATE_HORIZON_S}
        self.times.setdefault(key, deque(maxlen=RATE_SAMPLES)).append(now)

    def per_second(self, key: Hashable, now: float) -> float:
        recent = [t for t in self.times.get(key, ()) if now - t <= RATE_HORIZON_S]
        if len(recent) < 2:
            return 0.0
        return (len(recent) - 1) / max(now - recent[0], 1e-3)


@dataclass(frozen=True)
class Load:
    """What a policy knows of the devices, beside the pending items."""

    busy: int = 0  # other devices computing a batch now
    idle_since: float = 0.0  # when the asking device went idle
    arrivals: ArrivalRate = field(default_factory=ArrivalRate)
    cost: BatchCost = UNKNOWN_COST
    idle: int = 1  # devices asking for work now, the asking one among them
    foreground_seen: float = -math.inf  # when work above the background classes came or ran
    sizes: BatchSizes = NO_LIMIT  # the largest batch that pays, by cost key (``curve.py``)
    usage: Mapping[str, float] = field(default_factory=dict)  # tenants' recent device seconds
    # ...of every tenant a pass was charged to lately (``background_horizon``), waiting or not
    about: Mapping[str, float] = field(default_factory=dict)


IDLE = Load()


def fill_wait(
    size: int,
    audio: float,
    limit: int,
    arrivals_per_s: float,
    load: Load,
    share: float = FILL_SHARE,
) -> float:
    """Seconds (from ``load.idle_since``) to wait for a fuller batch of ``size`` chunks
    holding ``audio`` seconds (at most ``limit`` chunks, waiting at most ``share`` of the
    batch's predicted time): 0 to go now."""
    now_cost = load.cost.batch(size, audio)
    if load.busy == 0 or arrivals_per_s <= 0 or now_cost <= 0 or size >= limit:
        return 0.0
    mean = audio / size
    best_wait, best = 0.0, FILL_GAIN * size / now_cost
    longest = share * now_cost
    for step in range(1, STEPS + 1):
        wait = longest * step / STEPS
        more = min(arrivals_per_s * wait, limit - size)
        rate = (size + more) / (wait + load.cost.batch(size + more, audio + more * mean))
        if rate > best:
            best_wait, best = wait, rate
    return best_wait


def riders(
    batch: Sequence[T],
    offline: Sequence[T],
    limit: int,
    cost: BatchCost,
    share: float = RIDE_SHARE,
) -> list[T]:
    """Of ``offline`` (in the order they should go), those that ride in ``batch`` (online,
    at most ``limit`` chunks in all) while they add less than ``share`` to its predicted
    time; none while the cost is unknown."""
    size, audio = len(batch), sum(item.duration for item in batch)
    budget = (1 + share) * cost.batch(size, audio)
    taken: list[T] = []
    for item in offline:
        if size >= limit or share <= 0 or budget <= 0:
            break
        if cost.batch(size + 1, audio + item.duration) > budget:
            break
        taken.append(item)
        size, audio = size + 1, audio + item.duration
    return taken
