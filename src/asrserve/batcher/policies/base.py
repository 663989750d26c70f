"""What a batching policy is: when a batch is ready, and which pending items form it.

A policy is a pure object (no I/O, no clock reads: ``now`` is passed in), so the scheduler
and the ``asrserve tune`` simulator run the very same decisions, one on the service's
clock, the other on virtual time.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from asrserve.batcher.policies.fill import FILL_SHARE, IDLE, RIDE_SHARE, Load, fill_wait, riders
from asrserve.batcher.policies.selection import Pending, Selection, TenantShares, select_batch

T = TypeVar("T", bound=Pending)


RESERVE_SHARE = 0.25  # of a pool's devices, kept for foreground work (at least one of two)


def foreground_reserve(devices: int) -> int:
    """Devices of a pool of ``devices`` that take no background-only batch while
    foreground work is about: a quarter, rounded up; none for a single device."""
    return 0 if devices < 2 else math.ceil(devices * RESERVE_SHARE)


@dataclass(frozen=True)
class PolicyConfig:
    max_batch_size: int = 16
    max_wait: float = 0.02  # seconds a policy that waits for a fuller batch may wait
    max_age: float = 30.0  # seconds before a chunk jumps every priority and length rule
    # Offline work: priority classes from ``offline_from`` on never age ahead of online
    # work, and once online work arrived or ran, an offline-only batch starts only after
    # ``offline_holdoff`` s of online quiet (the next online request of a busy client is
    # usually already on its way, and would otherwise wait out that batch).
    offline_from: int | None = None
    offline_holdoff: float = 0.0
    # Filling (``fill.py``): an idle device waits at most ``fill_share`` of a batch's own
    # predicted time for a fuller batch; offline riders may add ``ride_share`` to an online
    # batch's time (0 turns either off).
    fill_share: float = FILL_SHARE
    ride_share: float = RIDE_SHARE
    # Live work (classes below ``live_below``): a batch of it ends where the batch cost
    # predicts it would run past ``live_batch_s`` (never below one item), and no device
    # waits to fill one. A turn's final decode then never waits long behind a batch of
    # others: on a CPU, where a batch costs about the sum of its items, live batches stay
    # small; on a GPU, where it costs little more than one item, they stay full.
    live_below: int | None = None
    live_batch_s: float = 0.0
    # Background work (classes from ``background_from``: async jobs, Batch API items): while
    # work of a higher class arrived or ran in the last ``background_horizon`` s, background
    # chunks join a batch, whichever class heads it, only while the batch cost predicts it
    # within ``background_batch_s`` (a background batch keeps one chunk at least). A forward
    # pass cannot be stopped: an interactive request waits for the one running, and on a
    # CPU a full batch of 30 s windows runs for most of a minute. Where a batch costs about
    # the sum of its items (a CPU) short batches lose nothing; where it costs little more
    # than one (a GPU) they stay full.
    background_from: int | None = None
    background_batch_s: float = 0.0
    background_horizon: float = 60.0
    # ...and in that time a background-only batch starts on a device only if at least
    # ``foreground_reserve`` other devices stay idle (unless its head is overdue): a request
    # that arrives while the others compute background work finds a device free. The same
    # reserve holds for a batch of tenants all past their share while another tenant is
    # about (a pass was charged to it in that time), whatever its class.
    foreground_reserve: int = 0


class Policy(ABC):
    """A batching policy. Subclasses set ``name`` and say when a batch is ready."""

    name: ClassVar[str]
    whole_files: ClassVar[bool] = False  # True: whole files through the engine's plain path
    uses_max_wait: ClassVar[bool] = False  # True: ``max_wait`` changes what it does
    fills: ClassVar[bool] = False  # True: an idle device may wait for a fuller batch (fill.py)

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self.selection = Selection(
            self.max_batch_size, config.max_age, config.offline_from, config.live_below
        )

    @property
    def max_batch_size(self) -> int:
        return self.config.max_batch_size

    @abstractmethod
    def ready(self, pending: Sequence[Pending], now: float) -> float | None:
        """None when a batch may go now (``pending`` is not empty); else the clock time to
        look again, unless an item arrives before."""

    def select(self, pending: Sequence[T], now: float, load: Load = IDLE) -> list[T]:
        """The items of the next batch (``pending`` stays untouched)."""
        return select_batch(pending, now, self.selection, load.usage)

    def dispatch(
        self, pending: Sequence[T], now: float, online_seen: float, load: Load = IDLE
    ) -> list[T] | float:
        """The batch to start now, or the clock time to look again (sooner if an item
        arrives). ``online_seen``: when online work last arrived or last finished;
        ``load``: the other devices, the recent arrivals and the batch cost."""
        wait = self.ready(pending, now)
        if wait is not None:
            return wait
        batch = self.select(pending, now, load)
        waiting = sum(1 for item in pending if item.key == batch[0].key)  # of the batch's key
        batch = self.sized(self.spread(batch, waiting, load), waiting, load)
        batch = self.within_budget(batch, now, load)
        hold = max(
            self.hold_until(batch[0], online_seen),
            self.fill_until(batch, now, load),
            self.reserved_until(batch, now, load),
        )
        if now < hold:
            return hold
        return [*batch, *self.riders(batch, pending, load)]

    def spread(self, batch: list[T], waiting: int, load: Load) -> list[T]:
        """With other devices idle too, this one takes its share of the ``waiting`` items of
        the batch's key, not all of them: the idle devices run them side by side (on CPU
        replicas a batch of all of them on one device leaves the others idle and takes
        longer)."""
        if load.idle <= 1:
            return batch
        return batch[: max(math.ceil(waiting / load.idle), 1)]

    def sized(self, batch: list[T], waiting: int, load: Load) -> list[T]:
        """``batch`` cut to the largest size its device's cost curve pays for, with
        ``waiting`` items of its key pending."""
        return batch[: max(load.sizes.largest(batch[0].cost_key, waiting), 1)]

    def within_budget(self, batch: list[T], now: float, load: Load) -> list[T]:
        """``batch``, cut where its predicted time passes a budget: a live batch past
        ``live_batch_s``; background chunks, whichever class heads the batch, where they
        would take it past ``background_batch_s`` while foreground work is about (a batch
        keeps its foreground chunks, and at least one)."""
        if self.is_live(batch[0]):
            return self._cut(batch, load, self.config.live_batch_s, lambda item: True)
        about = self.foreground_about(now, load) or not all(map(self.is_background, batch))
        budget = self.config.background_batch_s if about else 0.0
        return self._cut(batch, load, budget, self.is_background)

    @staticmethod
    def _cut(batch: list[T], load: Load, budget: float, counts: Callable[[T], bool]) -> list[T]:
        """``batch`` up to the first chunk that ``counts`` and takes the predicted time past
        ``budget`` (0: no limit); never below one chunk."""
        if budget <= 0:
            return batch
        audio = 0.0
        for size, item in enumerate(batch, start=1):
            audio += item.duration
            if size > 1 and counts(item) and load.cost.batch(size, audio) > budget:
                return batch[: size - 1]
        return batch

    def reserved_until(self, batch: Sequence[T], now: float, load: Load) -> float:
        """When a background-only ``batch`` may start on this device: at once if
        ``foreground_reserve`` other devices stay idle, or its head is overdue; else once
        foreground work has been quiet for ``background_horizon`` s. A batch of tenants all
        past their share, while another is about: at once if the reserve stays idle, else
        when a device's load changes (a pass ends, work arrives)."""
        config = self.config
        if config.foreground_reserve <= 0:
            return -math.inf
        if past_share(batch, load.about):
            return -math.inf if load.idle - 1 >= config.foreground_reserve else math.inf
        if not all(map(self.is_background, batch)):
            return -math.inf
        overdue = now - batch[0].enqueued_at >= config.max_age
        if not self.foreground_about(now, load) or overdue:
            return -math.inf
        if load.idle - 1 >= config.foreground_reserve:
            return -math.inf
        quiet = load.foreground_seen + config.background_horizon
        return min(quiet, batch[0].enqueued_at + config.max_age)

    def foreground_about(self, now: float, load: Load) -> bool:
        """Foreground work came or ran in the last ``background_horizon`` s."""
        return now - load.foreground_seen < self.config.background_horizon

    def riders(self, batch: Sequence[T], pending: Sequence[T], load: Load) -> list[T]:
        """Offline chunks of the same key that ride in an online ``batch`` with room."""
        head = batch[0]
        if self.whole_files or not self.is_online(head) or len(batch) >= self.max_batch_size:
            return []
        offline = sorted(
            (item for item in pending if item.key == head.key and not self.is_online(item)),
            key=lambda item: (item.priority, item.seq),
        )
        return riders(batch, offline, self.max_batch_size, load.cost, self.config.ride_share)

    def fill_until(self, batch: Sequence[T], now: float, load: Load) -> float:
        """When a device may start ``batch`` rather than wait for a fuller one (policies
        that fill; never for a batch whose head is overdue)."""
        head = batch[0]
        if not self.fills or self.is_live(head) or now - head.enqueued_at >= self.config.max_age:
            return -math.inf
        audio = sum(item.duration for item in batch)
        rate = load.arrivals.per_second(head.key, now)
        # never wait to fill a batch past what the device's cost curve pays for
        limit = min(self.max_batch_size, load.sizes.pays(head.cost_key))
        share = self.config.fill_share
        wait = fill_wait(len(batch), audio, limit, rate, load, share)
        return load.idle_since + wait if wait > 0 else -math.inf

    def hold_until(self, head: Pending, online_seen: float) -> float:
        """When a batch headed by ``head`` may start: online work at once; offline work
        after ``offline_holdoff`` s of online quiet, but never later than ``max_age`` after
        ``head`` arrived (a steady online client slows offline work down; it cannot stop
        it)."""
        if self.is_online(head):
            return -math.inf
        quiet = online_seen + self.config.offline_holdoff
        return min(quiet, head.enqueued_at + self.config.max_age)

    def is_live(self, item: Pending) -> bool:
        live = self.config.live_below
        return live is not None and item.priority < live

    def is_background(self, item: Pending) -> bool:
        background = self.config.background_from
        return background is not None and item.priority >= background

    def is_online(self, item: Pending) -> bool:
        offline = self.config.offline_from
        return offline is None or item.priority < offline


def past_share(batch: Sequence[Pending], about: Mapping[str, float]) -> bool:
    """Every tenant of ``batch`` took more recent device time than the mean of the tenants
    ``about``, and another tenant is about: the keys a reserved device is kept from."""
    shares = TenantShares(about, about)  # past the mean of those about: someone else is below it
    return all(shares.past(item.tenant) for item in batch)
