"""Background work (async jobs, Batch API items) yields to foreground work: its chunks join
a batch only within a time budget, and a quarter of the devices stay free of it, while
foreground work is about."""

from __future__ import annotations

import math
from dataclasses import dataclass

from asrserve.batcher.cost import LatencyModel
from asrserve.batcher.policies import PolicyConfig, get_policy
from asrserve.batcher.policies.base import Policy, foreground_reserve
from asrserve.batcher.policies.fill import Load

# 3 s per chunk and nothing per call: a CPU with 30 s windows (batching gains nothing).
CPU = LatencyModel(a=3.0, b=0.0, c=0.0, whole_b=0.0, whole_c=0.0)
# 0.2 s a call and 0.01 s per chunk: a GPU (a full batch costs little more than one chunk).
GPU = LatencyModel(a=0.01, b=0.0, c=0.2, whole_b=0.0, whole_c=0.2)
ASYNC, HORIZON = 1, 60.0


@dataclass(frozen=True)
class Item:
    job_id: str
    seq: int
    priority: int = ASYNC
    duration: float = 30.0
    enqueued_at: float = 0.0
    key: str = "k"
    window: int = 3000
    cost_key: str | None = None
    tenant: str = ""


def greedy(budget: float = 4.0, reserve: int = 0) -> Policy:
    config = PolicyConfig(
        max_batch_size=16,
        max_age=30.0,
        offline_from=2,
        background_from=ASYNC,
        background_batch_s=budget,
        background_horizon=HORIZON,
        foreground_reserve=reserve,
    )
    return get_policy("greedy", config)


def background(count: int, at: float = 0.0) -> list[Item]:
    return [Item(f"a{i}", i, enqueued_at=at) for i in range(count)]


def test_a_background_batch_ends_at_its_budget_while_foreground_work_is_about() -> None:
    """3 s a chunk, a 4 s budget: one chunk fits, two (6 s) do not; at least one goes."""
    pending = background(8)
    batch = greedy().dispatch(pending, 10.0, -math.inf, Load(cost=CPU, foreground_seen=5.0))
    assert batch == pending[:1]


def test_a_background_batch_stays_full_where_a_batch_costs_about_one_chunk() -> None:
    pending = background(8)
    batch = greedy().dispatch(pending, 10.0, -math.inf, Load(cost=GPU, foreground_seen=5.0))
    assert batch == pending


def test_background_batches_are_full_once_foreground_work_has_been_quiet() -> None:
    pending = background(8, at=100.0)
    load = Load(cost=CPU, foreground_seen=100.0 - HORIZON)
    assert greedy().dispatch(pending, 100.0, -math.inf, load) == pending


def test_background_chunks_join_a_foreground_batch_only_within_the_budget() -> None:
    """An interactive chunk heads the batch; the async chunks of its key would make it 27 s
    (3 s each), and the budget takes two of them."""
    interactive = Item("i", 99, priority=0, enqueued_at=10.0)
    pending = [*background(8), interactive]
    batch = greedy(budget=10.0).dispatch(pending, 10.0, -math.inf, Load(cost=CPU))
    assert batch == [interactive, pending[0], pending[1]]


def test_foreground_chunks_are_never_cut_by_the_background_budget() -> None:
    interactive = [Item(f"i{i}", i, priority=0) for i in range(4)]
    batch = greedy(budget=1.0).dispatch(
        [*interactive, *background(2)], 0.0, -math.inf, Load(cost=CPU)
    )
    assert batch == interactive


def test_the_last_idle_devices_take_no_background_work_while_foreground_work_is_about() -> None:
    """Two devices, one computing: the idle one holds background work until foreground
    work has been quiet for the horizon (or the head is overdue)."""
    pending = background(2, at=10.0)
    busy = Load(busy=1, idle=1, cost=CPU, foreground_seen=5.0)
    assert greedy(reserve=1).dispatch(pending, 10.0, -math.inf, busy) == 10.0 + 30.0
    held = Load(busy=1, idle=1, cost=CPU, foreground_seen=-45.0)
    assert greedy(reserve=1).dispatch(pending, 10.0, -math.inf, held) == -45.0 + HORIZON


def test_background_work_starts_while_another_device_stays_idle() -> None:
    pending = background(2, at=10.0)
    both_idle = Load(busy=0, idle=2, cost=CPU, foreground_seen=5.0)
    assert greedy(reserve=1).dispatch(pending, 10.0, -math.inf, both_idle) == pending[:1]


def test_an_overdue_background_chunk_is_not_held_for_the_reserve() -> None:
    pending = background(1, at=0.0)
    busy = Load(busy=1, idle=1, cost=CPU, foreground_seen=29.0)
    assert greedy(reserve=1).dispatch(pending, 30.0, -math.inf, busy) == pending


def test_the_reserve_holds_no_foreground_work() -> None:
    interactive = [Item("i", 0, priority=0, enqueued_at=10.0)]
    busy = Load(busy=1, idle=1, cost=CPU, foreground_seen=10.0)
    assert greedy(reserve=1).dispatch(interactive, 10.0, -math.inf, busy) == interactive


def test_a_quarter_of_the_devices_is_reserved_and_none_of_one() -> None:
    assert [foreground_reserve(n) for n in (1, 2, 4, 5, 8)] == [0, 1, 1, 2, 2]


def test_the_reserve_holds_the_work_of_tenants_past_their_share_while_another_is_about() -> None:
    """Issue 42: a looping key's sampled passes held both devices (1.5-4.5 s each), and
    an honest key's request waited for one of them to end. While b is about (a pass was
    charged to it lately), a's requests, a being past the mean, take one device of two."""
    mine = [Item("a", 0, priority=0, enqueued_at=10.0, tenant="a")]
    busy = Load(busy=1, idle=1, cost=CPU, about={"a": 8.0, "b": 1.0})
    assert greedy(reserve=1).dispatch(mine, 10.0, -math.inf, busy) == math.inf
    both_idle = Load(busy=0, idle=2, cost=CPU, about={"a": 8.0, "b": 1.0})
    assert greedy(reserve=1).dispatch(mine, 10.0, -math.inf, both_idle) == mine
    within = Load(busy=1, idle=1, cost=CPU, about={"a": 1.0, "b": 8.0})
    assert greedy(reserve=1).dispatch(mine, 10.0, -math.inf, within) == mine
    alone = Load(busy=1, idle=1, cost=CPU, about={"a": 8.0})
    assert greedy(reserve=1).dispatch(mine, 10.0, -math.inf, alone) == mine
