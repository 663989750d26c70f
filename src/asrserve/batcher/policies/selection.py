"""Which pending chunks go into the next batch: pure functions, no I/O, no clock reads.

A batch holds chunks that share decoding options (a batch runs one ``generate`` call).
Selection, in order of precedence:

1. Aging: a chunk that has waited longer than ``max_age`` heads the batch, whatever its
   class, so nothing waits without bound — unless its tenant is past its share (more recent
   device time than the mean of the tenants waiting): a key whose backlog ages because it
   sends more than its share cannot age its way ahead of other keys' fresh requests (its
   account halves every 10 s while it waits, so its turn comes). Offline work (classes from
   ``offline_from``) is exempt: it fills idle capacity and never pushes ahead of online
   requests. Nor is it selected into an online batch; it may only ride in one afterwards,
   within the small time budget of ``fill.riders``.
2. Priority class: interactive before async jobs before offline batch work.
3. Fairness across tenants (API keys), from their recent device time (``usage``): the
   tenant that took least goes first. Live work of a tenant past its share (more than the
   mean of the tenants waiting) goes with interactive work, behind other tenants' requests.
   Then fairness across jobs: a job's k-th pending chunk ranks after every other job's
   (k-1)-th, so one two-hour file cannot starve a five-second clip.
4. Length: among equals, chunks of the same encoder window (a batch is padded to its
   widest) and then of similar speech length (decode cost) batch together.
5. Arrival order.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar


class Pending(Protocol):
    @property
    def key(self) -> Hashable: ...  # decoding options: only equal keys share a batch
    @property
    def priority(self) -> int: ...
    @property
    def job_id(self) -> str: ...
    @property
    def duration(self) -> float: ...
    @property
    def enqueued_at(self) -> float: ...
    @property
    def seq(self) -> int: ...  # global arrival number, a stable tie-breaker
    @property
    def window(self) -> int: ...  # encoder frames the item is padded to (its length bucket)
    @property
    def cost_key(self) -> Hashable | None: ...  # its device cost curve (None: none kept)
    @property
    def tenant(self) -> str: ...  # who it is for: its share of the devices


LENGTH_BUCKET_S = 5.0

T = TypeVar("T", bound=Pending)


NO_USAGE: Mapping[str, float] = {}


@dataclass(frozen=True)
class Selection:
    max_batch_size: int
    max_age: float  # seconds before a chunk is promoted to the head of the next batch
    offline_from: int | None = None  # priorities from this one on: never promoted, no riders
    live_below: int | None = None  # priorities below this one: live work


def select_batch(
    items: Sequence[T], now: float, rule: Selection, usage: Mapping[str, float] = NO_USAGE
) -> list[T]:
    """The next batch from ``items`` (which stay untouched); empty only if ``items`` is.
    ``usage``: each tenant's recent device seconds."""
    if not items:
        return []
    shares = TenantShares({item.tenant for item in items}, usage)
    standing = _standing(rule, shares)
    head = _head(items, now, rule, standing, shares)
    candidates = [item for item in items if item.key == head.key and _may_join(item, head, rule)]
    rank = _fair_rank(candidates)
    head_bucket = _bucket(head.duration)

    def order(item: T) -> tuple[int, float, int, int, int, int]:
        return (
            *standing(item),
            rank[id(item)],
            abs(item.window - head.window),  # padding up to a wider window costs compute
            abs(_bucket(item.duration) - head_bucket),
            item.seq,
        )

    # nsmallest is sorted(...)[:n], without sorting the whole backlog
    rest = heapq.nsmallest(
        rule.max_batch_size - 1, (item for item in candidates if item is not head), key=order
    )
    return [head, *rest]


Standing = Callable[[Pending], tuple[int, float]]


def _head(
    items: Sequence[T], now: float, rule: Selection, standing: Standing, shares: TenantShares
) -> T:
    ages = rule.offline_from
    overdue = [
        item
        for item in items
        if now - item.enqueued_at >= rule.max_age
        and (ages is None or item.priority < ages)
        and not shares.past(item.tenant)
    ]
    if overdue:
        return min(overdue, key=lambda item: item.seq)
    rank = _fair_rank(items)
    return min(items, key=lambda item: (*standing(item), rank[id(item)], item.seq))


class TenantShares:
    """``tenants``' recent device seconds (``usage``), and their share: the mean of them.
    With one tenant, nobody is past it."""

    def __init__(self, tenants: Collection[str], usage: Mapping[str, float]) -> None:
        self.several = len(tenants) > 1
        self.usage = usage
        self.share = sum(usage.get(t, 0.0) for t in tenants) / len(tenants) if tenants else 0.0

    def used(self, tenant: str) -> float:
        return self.usage.get(tenant, 0.0) if self.several else 0.0

    def past(self, tenant: str) -> bool:
        return self.several and self.used(tenant) > self.share


def _standing(rule: Selection, shares: TenantShares) -> Standing:
    """Each item's (class, its tenant's recent device seconds): with one tenant waiting,
    its priority alone. A tenant past its share has its live work ranked as interactive:
    others' requests overtake it."""
    floor = rule.live_below

    def standing(item: Pending) -> tuple[int, float]:
        if floor is not None and item.priority < floor and shares.past(item.tenant):
            return floor, shares.used(item.tenant)
        return item.priority, shares.used(item.tenant)

    return standing


def _may_join(item: Pending, head: Pending, rule: Selection) -> bool:
    """Offline items do not ride in a batch headed by online work."""
    offline = rule.offline_from
    return offline is None or head.priority >= offline or item.priority < offline


def _fair_rank(items: Sequence[Pending]) -> dict[int, int]:
    """Position of each item among the pending items of its own job (0 = its oldest)."""
    seen: dict[str, int] = {}
    rank: dict[int, int] = {}
    for item in sorted(items, key=lambda item: item.seq):
        rank[id(item)] = seen.get(item.job_id, 0)
        seen[item.job_id] = rank[id(item)] + 1
    return rank


def _bucket(duration: float) -> int:
    return int(duration // LENGTH_BUCKET_S)
