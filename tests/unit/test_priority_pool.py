"""The preprocessing pool runs the most urgent waiting step first, in arrival order within
a class, and hands each step's result or exception to its caller."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from asrserve.inference.priority_pool import PriorityPool


def occupy(pool: PriorityPool, gate: threading.Event) -> Future[bool]:
    """A step that holds one of ``pool``'s threads until ``gate`` opens, once it runs."""
    started = threading.Event()

    def hold() -> bool:
        started.set()
        return gate.wait()

    future = pool.submit(hold)
    assert started.wait(10)
    return future


def test_the_most_urgent_waiting_step_runs_first_then_arrival_order() -> None:
    pool = PriorityPool(1)
    gate, ran = threading.Event(), list[str]()
    blocker = occupy(pool, gate)  # holds the one thread while the rest queue up
    futures = [
        pool.at(priority).submit(ran.append, label)
        for priority, label in [(1, "async 1"), (2, "batch"), (1, "async 2"), (0, "sync")]
    ]
    assert pool.waiting() == 4
    gate.set()
    blocker.result(timeout=10)
    for future in futures:
        future.result(timeout=10)
    assert ran == ["sync", "async 1", "async 2", "batch"]
    pool.shutdown()


def test_a_step_hands_its_exception_to_its_caller_and_the_pool_goes_on() -> None:
    pool = PriorityPool(1)
    failed = pool.at(1).submit(int, "not a number")
    with pytest.raises(ValueError, match="not a number"):
        failed.result(timeout=10)
    assert pool.at(0).submit(int, "42").result(timeout=10) == 42
    pool.shutdown()


def test_shutdown_cancels_the_waiting_steps_and_refuses_new_ones() -> None:
    pool = PriorityPool(1)
    gate = threading.Event()
    running = occupy(pool, gate)
    waiting = pool.at(1).submit(str, "never")
    pool.shutdown(wait=False, cancel_futures=True)
    assert waiting.cancelled()
    gate.set()
    assert running.result(timeout=10) is True
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(str, "late")
