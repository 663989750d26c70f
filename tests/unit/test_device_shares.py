"""Each tenant's device time: a pass split by its windows' frames, decayed with time."""

from __future__ import annotations

import pytest

from asrserve.batcher.shares import DeviceShares


def test_a_pass_is_split_by_frames_and_decays_by_half_lives() -> None:
    shares = DeviceShares(half_life=10.0)
    shares.charge(["a", "b", "a"], [3000, 1000, 2000], 6.0, now=100.0)
    assert shares.used("a", 100.0) == pytest.approx(5.0)
    assert shares.used("b", 100.0) == pytest.approx(1.0)
    assert shares.used("a", 110.0) == pytest.approx(2.5)  # one half-life later
    shares.charge(["b"], [500], 2.0, now=120.0)
    assert shares.standing(["a", "b", "c"], 120.0) == pytest.approx(
        {"a": 1.25, "b": 2.25, "c": 0.0}
    )


def test_accounts_decayed_to_nothing_are_dropped() -> None:
    shares = DeviceShares(half_life=1.0)
    shares.charge(["a"], [3000], 1.0, now=0.0)
    shares.standing([], 20.0)
    assert shares.used("a", 20.0) == 0.0
    assert not shares._accounts


def test_listeners_hear_each_tenants_device_seconds_and_new_audio() -> None:
    heard: list[tuple[str, float, float]] = []
    shares = DeviceShares(listeners=[lambda *charge: heard.append(charge)])
    shares.charge(["a", "b", "a"], [3000, 1000, 2000], 6.0, 0.0, [30.0, 10.0, 0.0])
    shares.charge(["a"], [3000], 0.5, 1.0)  # a CPU step: no audio
    assert heard == [("a", 5.0, 30.0), ("b", 1.0, 10.0), ("a", 0.5, 0.0)]
