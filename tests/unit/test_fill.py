"""Keeping batches full: an idle device's wait for a fuller batch, offline riders, and the
batch cost and arrival rate they are decided on."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from asrserve.batcher.cost import REFIT_EVERY, LatencyModel, MeasuredCost
from asrserve.batcher.policies import PolicyConfig, get_policy
from asrserve.batcher.policies.fill import (
    FILL_SHARE,
    RATE_HORIZON_S,
    ArrivalRate,
    Load,
    fill_wait,
    riders,
)

# A device whose batches cost mostly a fixed 1 s per call: batching pays.
FIXED = LatencyModel(a=0.01, b=0.0, c=1.0, whole_b=0.0, whole_c=1.0)
# One whose batches cost 0.5 s per chunk and nothing per call: batching gains nothing.
PER_CHUNK = LatencyModel(a=0.5, b=0.0, c=0.0, whole_b=0.0, whole_c=0.0)


@dataclass(frozen=True)
class Item:
    job_id: str
    seq: int
    priority: int = 0
    duration: float = 5.0
    enqueued_at: float = 0.0
    key: str = "k"
    window: int = 500
    cost_key: str | None = None
    tenant: str = ""


def steady(rate: float, until: float, key: str = "k") -> ArrivalRate:
    """Arrivals of ``key`` every 1/rate s up to ``until``."""
    arrivals = ArrivalRate()
    for i in range(int(rate * until) + 1):
        arrivals.arrived(key, i / rate)
    return arrivals


def test_a_device_never_waits_when_no_other_device_is_busy() -> None:
    load = Load(busy=0, idle_since=10.0, arrivals=steady(20, 10), cost=FIXED)
    assert fill_wait(1, 5.0, 16, 20.0, load) == 0.0


def test_a_device_waits_for_arrivals_when_others_are_busy_and_calls_cost_much() -> None:
    load = Load(busy=1, idle_since=10.0, arrivals=steady(20, 10), cost=FIXED)
    wait = fill_wait(1, 5.0, 16, 20.0, load)
    assert 0 < wait <= FILL_SHARE * FIXED.batch(1, 5.0)


@pytest.mark.parametrize(
    ("cost", "rate"), [(PER_CHUNK, 20.0), (FIXED, 0.0), (MeasuredCost(), 20.0)]
)
def test_no_wait_when_it_gains_nothing_or_nothing_is_known(
    cost: LatencyModel | MeasuredCost, rate: float
) -> None:
    load = Load(busy=1, idle_since=10.0, cost=cost)
    assert fill_wait(1, 5.0, 16, rate, load) == 0.0


def test_a_full_batch_never_waits() -> None:
    load = Load(busy=1, idle_since=10.0, cost=FIXED)
    assert fill_wait(16, 80.0, 16, 20.0, load) == 0.0


def test_greedy_holds_a_small_batch_while_another_device_computes() -> None:
    greedy = get_policy("greedy", PolicyConfig(max_batch_size=16))
    pending = [Item("a", 0, enqueued_at=10.0)]
    arrivals = steady(20, 10)
    busy = greedy.dispatch(pending, 10.0, -math.inf, Load(1, 10.0, arrivals, FIXED))
    expected = 10.0 + fill_wait(
        1, 5.0, 16, arrivals.per_second("k", 10.0), Load(1, 10.0, arrivals, FIXED)
    )
    assert busy == expected
    assert greedy.dispatch(pending, 10.0, -math.inf, Load(0, 10.0, arrivals, FIXED)) == pending
    assert greedy.dispatch(pending, expected, -math.inf, Load(1, 10.0, arrivals, FIXED)) == pending


def test_an_overdue_chunk_never_waits_for_company() -> None:
    greedy = get_policy("greedy", PolicyConfig(max_batch_size=16, max_age=30.0))
    pending = [Item("a", 0, enqueued_at=0.0)]
    load = Load(1, 40.0, steady(20, 40), FIXED)
    assert greedy.dispatch(pending, 40.0, -math.inf, load) == pending


def test_the_window_policy_does_not_fill() -> None:
    window = get_policy("window", PolicyConfig(max_batch_size=16, max_wait=0.0))
    pending = [Item("a", 0, enqueued_at=10.0)]
    assert (
        window.dispatch(pending, 10.0, -math.inf, Load(1, 10.0, steady(20, 10), FIXED)) == pending
    )


def test_offline_chunks_ride_while_they_add_under_a_tenth() -> None:
    online = [Item("o", 0)]
    offline = [Item(f"b{i}", i + 1, priority=2) for i in range(20)]
    # FIXED: 1.01 s for one chunk; each rider adds 0.01 s, so ten fit under 1.111 s.
    assert riders(online, offline, 16, FIXED, share=0.10) == offline[:10]
    assert riders(online, offline, 4, FIXED, share=0.10) == offline[:3]
    assert riders(online, offline, 16, PER_CHUNK, share=0.10) == []
    assert riders(online, offline, 16, MeasuredCost(), share=0.10) == []


def test_dispatch_adds_riders_of_the_same_key_to_an_online_batch() -> None:
    greedy = get_policy("greedy", PolicyConfig(max_batch_size=16, offline_from=2, ride_share=0.10))
    online = Item("o", 0)
    same = [Item(f"b{i}", i + 1, priority=2) for i in range(2)]
    other = Item("x", 3, priority=2, key="other")
    batch = greedy.dispatch([online, *same, other], 0.0, -math.inf, Load(cost=FIXED))
    assert batch == [online, *same]


def test_the_measured_cost_is_the_mean_rate_until_fitted_then_the_batches_cost() -> None:
    cost = MeasuredCost()
    assert cost.batch(2, 10.0) == 0.0  # nothing measured yet
    rows = [(1 + i % 4, 5.0 * (1 + i % 4)) for i in range(REFIT_EVERY)]
    for size, audio in rows[:-1]:
        cost.observe(size, audio, 0.2 * size + 1.0)
    spent = sum(0.2 * size + 1.0 for size, _ in rows[:-1])
    rate = spent / sum(audio for _, audio in rows[:-1])
    assert cost.batch(2, 10.0) == pytest.approx(rate * 10.0)
    cost.observe(*rows[-1], 0.2 * rows[-1][0] + 1.0)
    assert cost.batch(8, 40.0) == pytest.approx(0.2 * 8 + 1.0)


def test_the_arrival_rate_counts_only_recent_arrivals() -> None:
    arrivals = steady(10, 1.0)  # 11 arrivals from 0 to 1 s
    assert arrivals.per_second("k", 1.0) == pytest.approx(10.0)
    assert arrivals.per_second("k", 1.0 + RATE_HORIZON_S + 0.5) == 0.0
    assert arrivals.per_second("other", 1.0) == 0.0


def test_a_share_of_zero_turns_filling_and_riding_off() -> None:
    load = Load(busy=1, idle_since=10.0, cost=FIXED)
    assert fill_wait(1, 5.0, 16, 20.0, load, share=0.0) == 0.0
    assert riders([Item("o", 0)], [Item("b", 1, priority=2)], 16, FIXED, share=0.0) == []


def test_a_live_batch_ends_where_its_predicted_time_passes_the_budget() -> None:
    """0.5 s per chunk and a 1.2 s budget: two chunks (1.0 s) fit, a third (1.5 s) does not."""
    greedy = get_policy("greedy", PolicyConfig(max_batch_size=16, live_below=0, live_batch_s=1.2))
    pending = [Item(f"s{i}", i, priority=-1) for i in range(5)]
    batch = greedy.dispatch(pending, 0.0, -math.inf, Load(cost=PER_CHUNK))
    assert batch == pending[:2]


def test_a_live_batch_stays_full_where_a_batch_costs_about_one_chunk() -> None:
    greedy = get_policy("greedy", PolicyConfig(max_batch_size=16, live_below=0, live_batch_s=1.2))
    pending = [Item(f"s{i}", i, priority=-1) for i in range(5)]
    batch = greedy.dispatch(pending, 0.0, -math.inf, Load(cost=FIXED))
    assert batch == pending


def test_one_live_chunk_goes_even_when_it_alone_passes_the_budget() -> None:
    greedy = get_policy("greedy", PolicyConfig(max_batch_size=16, live_below=0, live_batch_s=0.1))
    pending = [Item(f"s{i}", i, priority=-2) for i in range(3)]
    assert greedy.dispatch(pending, 0.0, -math.inf, Load(cost=PER_CHUNK)) == pending[:1]


def test_the_live_budget_leaves_other_classes_alone() -> None:
    greedy = get_policy("greedy", PolicyConfig(max_batch_size=16, live_below=0, live_batch_s=0.1))
    pending = [Item(f"j{i}", i, priority=0) for i in range(5)]
    assert greedy.dispatch(pending, 0.0, -math.inf, Load(cost=PER_CHUNK)) == pending


def test_no_device_waits_to_fill_a_live_batch() -> None:
    """The same pending chunk and load as a held interactive batch (above), but live."""
    greedy = get_policy("greedy", PolicyConfig(max_batch_size=16, live_below=0, live_batch_s=5.0))
    pending = [Item("a", 0, priority=-1, enqueued_at=10.0)]
    load = Load(1, 10.0, steady(20, 10), FIXED)
    assert greedy.dispatch(pending, 10.0, -math.inf, load) == pending
