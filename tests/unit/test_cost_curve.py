"""The device cost curve (batcher/curve.py): the batch size that pays, learned from batches,
and a policy's batches held to it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from asrserve.batcher.cost import LatencyModel
from asrserve.batcher.curve import EXPLORE_EVERY, MIN_BATCHES, CostCurves
from asrserve.batcher.policies import PolicyConfig, get_policy
from asrserve.batcher.policies.fill import ArrivalRate, Load

KEY = ("tiny.en", 30.0)
FIXED = LatencyModel(a=0.01, b=0.0, c=1.0, whole_b=0.0, whole_c=1.0)  # 1 s a call


def seeded(costs: dict[int, float], limit: int = 16) -> CostCurves:
    """Curves whose ``KEY`` was calibrated at ``costs`` (device s per audio s, by size)."""
    curves = CostCurves(limit)
    for size, cost in costs.items():
        curves.seed(KEY, size, cost)
    return curves


def test_a_cpu_curve_pays_for_no_batching() -> None:
    # each chunk costs more in a larger batch: throughput falls from batch 1 on
    assert seeded({1: 0.02, 2: 0.021, 4: 0.024, 8: 0.03}).pays(KEY) == 1


def test_a_gpu_curve_pays_for_its_largest_measured_batch() -> None:
    assert seeded({1: 0.01, 2: 0.005, 4: 0.0026, 8: 0.0013, 16: 0.0007}).pays(KEY) == 16


def test_the_smallest_size_within_five_percent_of_the_best_pays() -> None:
    # batch 8 is best, batch 4 within 5% of it: the smaller batch keeps the latency
    assert seeded({1: 0.02, 2: 0.012, 4: 0.0104, 8: 0.0100}).pays(KEY) == 4


def test_sizes_traffic_measured_compare_as_traffic_measured_them() -> None:
    curves = seeded({1: 0.02, 2: 0.03})
    for _ in range(MIN_BATCHES):  # the device got faster per chunk at batch 2
        curves.observe(KEY, 1, 10.0, 0.2)
        curves.observe(KEY, 2, 20.0, 0.2)
    assert curves.pays(KEY) == 2


def test_traffic_at_one_size_scales_the_calibration_at_the_others() -> None:
    # calibrated on full windows: batch 4 pays. Traffic's short chunks cost 2.5x more per
    # audio second at batch 1, and so (the calibration's shape says) would they at batch 4
    curves = seeded({1: 1 / 77, 4: 1 / 66})
    assert curves.pays(KEY) == 1
    curves = seeded({1: 1 / 77, 2: 1 / 90})
    for _ in range(MIN_BATCHES):
        curves.observe(KEY, 1, 10.0, 10.0 / 30.8)
    assert curves.pays(KEY) == 2
    assert curves.view()[0]["points"]["2"]["audio_s_per_s"] == round(90 * 30.8 / 77, 2)


def test_a_size_counts_once_traffic_ran_it_often_enough() -> None:
    curves = seeded({1: 0.02})
    for _ in range(MIN_BATCHES - 1):
        curves.observe(KEY, 4, 40.0, 0.1)
    assert curves.pays(KEY) == 1
    curves.observe(KEY, 4, 40.0, 0.1)
    assert curves.pays(KEY) == 4


def test_a_point_follows_the_device_as_its_load_changes() -> None:
    curves = seeded({})
    for _ in range(20):
        curves.observe(KEY, 1, 10.0, 0.2)
    for _ in range(100):  # the other tenants' work now shares the device
        curves.observe(KEY, 1, 10.0, 0.4)
    assert curves.view()[0]["points"]["1"]["seconds_per_audio_s"] == 0.04


def test_a_key_without_a_curve_is_limited_only_by_the_policy() -> None:
    assert CostCurves(16).largest(("base", 5.0), waiting=40) == 16


def test_the_size_above_the_cap_is_tried_once_in_a_while() -> None:
    curves = seeded({1: 0.02, 2: 0.021, 4: 0.024})
    sizes = []
    for _ in range(3 * EXPLORE_EVERY):
        size = curves.largest(KEY, waiting=8)
        sizes.append(size)
        curves.observe(KEY, size, 10.0 * size, 0.2 * size)
    assert [i for i, size in enumerate(sizes) if size != 1] == [EXPLORE_EVERY, 2 * EXPLORE_EVERY]


def test_no_size_is_tried_above_what_is_waiting() -> None:
    curves = seeded({1: 0.02, 2: 0.021})
    for _ in range(2 * EXPLORE_EVERY):
        curves.observe(KEY, 1, 10.0, 0.2)
    assert curves.largest(KEY, waiting=1) == 1


@dataclass(frozen=True)
class Item:
    job_id: str
    seq: int
    priority: int = 1
    duration: float = 20.0
    enqueued_at: float = 0.0
    key: str = "k"
    window: int = 3000
    cost_key: tuple[str, float] | None = KEY
    tenant: str = ""


def test_a_policy_forms_batches_no_larger_than_the_curve_pays_for() -> None:
    pending = [Item(f"j{i}", i) for i in range(8)]
    greedy = get_policy("greedy", PolicyConfig(max_batch_size=16))
    load = Load(sizes=seeded({1: 0.02, 2: 0.012, 4: 0.0125, 8: 0.013}))
    assert greedy.dispatch(pending, 0.0, -math.inf, load) == pending[:2]


def test_without_a_curve_a_policy_takes_all_it_may() -> None:
    pending = [Item(f"j{i}", i) for i in range(8)]
    greedy = get_policy("greedy", PolicyConfig(max_batch_size=16))
    assert greedy.dispatch(pending, 0.0, -math.inf, Load()) == pending


def test_no_device_waits_to_fill_a_batch_the_curve_does_not_pay_for() -> None:
    # a fixed cost per call would make waiting for company pay, but the device's curve
    # says a batch of 2 gets no more done than 1: the lone chunk goes at once
    greedy = get_policy("greedy", PolicyConfig(max_batch_size=16))
    pending = [Item("a", 0, enqueued_at=10.0)]
    arrivals = ArrivalRate()
    for step in range(20):
        arrivals.arrived("k", 9.0 + step / 20)
    waits = Load(1, 10.0, arrivals, FIXED)
    curve = Load(1, 10.0, arrivals, FIXED, sizes=seeded({1: 0.02, 2: 0.021}))
    assert not isinstance(greedy.dispatch(pending, 10.0, -math.inf, waits), list)
    assert greedy.dispatch(pending, 10.0, -math.inf, curve) == pending
