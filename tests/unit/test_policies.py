"""Batch selection rules, as pure functions."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import ValidationError

from asrserve.batcher.policies import POLICIES, PolicyConfig, Selection, get_policy, select_batch
from asrserve.settings import Settings, registered


@dataclass(frozen=True)
class Item:
    job_id: str
    seq: int
    priority: int = 1
    duration: float = 10.0
    enqueued_at: float = 0.0
    key: str = "default"
    window: int = 3000
    cost_key: str | None = None
    tenant: str = ""


RULE = Selection(max_batch_size=4, max_age=30.0)


def test_empty_gives_empty() -> None:
    assert select_batch([], 0.0, RULE) == []


def test_interactive_before_async_before_batch() -> None:
    items = [Item("a", 0, priority=2), Item("b", 1, priority=1), Item("c", 2, priority=0)]
    batch = select_batch(items, 0.0, Selection(max_batch_size=2, max_age=30.0))
    assert [i.job_id for i in batch] == ["c", "b"]


def test_long_file_cannot_starve_a_short_clip() -> None:
    long_file = [Item("long", seq) for seq in range(100)]
    clip = Item("clip", 100)
    batch = select_batch([*long_file, clip], 0.0, RULE)
    assert clip in batch
    assert len(batch) == 4


def test_only_equal_options_share_a_batch() -> None:
    items = [Item("a", 0, key="beam5"), Item("b", 1, key="beam1"), Item("c", 2, key="beam5")]
    batch = select_batch(items, 0.0, RULE)
    assert {i.key for i in batch} == {"beam5"}
    assert [i.job_id for i in batch] == ["a", "c"]


def test_similar_lengths_batch_together() -> None:
    head = Item("h", 0, duration=4.0)
    others = [Item(f"j{n}", n + 1, duration=d) for n, d in enumerate([29, 3, 28, 5, 27, 2])]
    batch = select_batch([head, *others], 0.0, RULE)
    assert sorted(i.duration for i in batch) == [2, 3, 4.0, 5]


def test_aging_promotes_a_starved_chunk() -> None:
    old = Item("old", 0, priority=2, enqueued_at=0.0)
    fresh = [Item(f"i{n}", n + 1, priority=0, enqueued_at=40.0) for n in range(8)]
    assert select_batch([old, *fresh], 35.0, Selection(2, 30.0))[0] is old
    assert old not in select_batch([old, *fresh], 20.0, Selection(2, 30.0))


def test_batch_never_exceeds_max() -> None:
    items = [Item(f"j{n}", n) for n in range(50)]
    assert len(select_batch(items, 0.0, RULE)) == 4


def test_same_encoder_window_batches_together() -> None:
    head = Item("h", 0, duration=4.0, window=500)
    wide = [Item(f"w{n}", n + 1, duration=4.0, window=3000) for n in range(3)]
    narrow = [Item(f"n{n}", n + 4, duration=8.0, window=1000) for n in range(3)]
    batch = select_batch([head, *wide, *narrow], 0.0, RULE)
    assert [i.window for i in batch] == [500, 1000, 1000, 1000]


def test_offline_work_offline_from_ahead_of_online_work() -> None:
    old = Item("old", 0, priority=2, enqueued_at=0.0)
    fresh = [Item(f"new{i}", 0, priority=0, enqueued_at=34.0) for i in range(3)]
    rule = Selection(2, 30.0, offline_from=2)
    assert old not in select_batch([old, *fresh], 1000.0, rule)
    assert select_batch([old], 1000.0, rule) == [old]  # alone, it runs: idle capacity is used
    aged_async = Item("async", 0, priority=1, enqueued_at=0.0)
    assert select_batch([aged_async, *fresh], 35.0, rule)[0] is aged_async


def test_offline_work_does_not_ride_in_an_online_batch() -> None:
    online = Item("online", 0, priority=0)
    offline = [Item(f"b{i}", i + 1, priority=2) for i in range(3)]
    rule = Selection(8, 30.0, offline_from=2)
    assert select_batch([online, *offline], 0.0, rule) == [online]
    assert select_batch(offline, 0.0, rule) == offline
    assert select_batch([online, *offline], 0.0, Selection(8, 30.0)) == [online, *offline]


# --- the registry -------------------------------------------------------------------------


def test_an_unknown_policy_is_a_validation_error_naming_the_known_ones() -> None:
    with pytest.raises(ValidationError, match="unknown batch policy 'fifo': use one of greedy"):
        Settings(batch_policy="fifo")
    assert tuple(POLICIES) == registered.BATCH_POLICIES  # the names the settings check


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_registered_policy_round_trips_through_the_environment(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("ASRSERVE_BATCH_POLICY", name)
    assert get_policy(Settings().batch_policy, PolicyConfig()).name == name


def test_none_takes_one_whole_file_at_a_time() -> None:
    items = [Item(f"j{n}", n) for n in range(3)]
    policy = get_policy("none", PolicyConfig(max_batch_size=8))
    assert (policy.whole_files, policy.select(items, 0.0)) == (True, items[:1])


def test_unbatched_takes_one_window_of_the_service_pipeline_at_a_time() -> None:
    """Batches of one, but windows (not whole files) and the greedy rules: the pipeline of a
    batching policy without the batching."""
    items = [Item(f"j{n}", n) for n in range(3)]
    policy = get_policy("unbatched", PolicyConfig(max_batch_size=8))
    assert (policy.whole_files, policy.select(items, 0.0)) == (False, items[:1])
    assert get_policy("greedy", PolicyConfig(max_batch_size=8)).select(items, 0.0) == items


LIVE_RULE = Selection(max_batch_size=1, max_age=30.0, live_below=0)


def test_one_tenant_is_ordered_by_priority_alone() -> None:
    items = [Item("live", 1, priority=-1, tenant="a"), Item("sync", 0, priority=0, tenant="a")]
    assert select_batch(items, 0.0, LIVE_RULE, {"a": 100.0})[0].job_id == "live"


def test_live_work_past_its_share_goes_behind_other_tenants_requests() -> None:
    """Issue 42: one key's interims (priority -1) ran ahead of every key's requests."""
    items = [
        Item("a-live", 0, priority=-1, tenant="a"),
        Item("b-sync", 1, priority=0, tenant="b"),
        Item("a-sync", 2, priority=0, tenant="a"),
        Item("b-async", 3, priority=1, tenant="b"),
    ]
    order = []
    pending = list(items)
    while pending:
        [taken] = select_batch(pending, 0.0, LIVE_RULE, {"a": 8.0, "b": 1.0})
        order.append(taken.job_id)
        pending.remove(taken)
    # a is past the mean (4.5): its live work ranks with the requests, after b's
    assert order == ["b-sync", "a-live", "a-sync", "b-async"]
    within = select_batch(items, 0.0, LIVE_RULE, {"a": 1.0, "b": 8.0})
    assert within[0].job_id == "a-live"  # within its share, live still goes first


def test_tenants_of_one_class_go_least_served_first() -> None:
    items = [Item("a", seq, priority=0, tenant="a") for seq in range(3)]
    items.append(Item("b", 3, priority=0, tenant="b"))
    batch = select_batch(items, 0.0, Selection(max_batch_size=2, max_age=30.0), {"a": 2.0})
    assert [i.job_id for i in batch] == ["b", "a"]


def test_an_aged_chunk_of_a_tenant_past_its_share_does_not_jump_anothers_requests() -> None:
    """Issue 42: a flooding key always had async windows older than max_age, and each
    headed the next batch ahead of the honest key's fresh request. Within its share (or
    alone) an aged chunk still jumps the queue."""
    aged = Item("a-async", 0, priority=1, enqueued_at=0.0, tenant="a")
    fresh = Item("b-sync", 1, priority=0, enqueued_at=40.0, tenant="b")
    rule = Selection(max_batch_size=1, max_age=30.0)
    assert select_batch([aged, fresh], 40.0, rule, {"a": 8.0, "b": 1.0}) == [fresh]
    assert select_batch([aged, fresh], 40.0, rule, {"a": 1.0, "b": 8.0}) == [aged]
