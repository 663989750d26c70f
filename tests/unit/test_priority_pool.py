"""The preprocessing pool runs the most urgent waiting step first; within a class, the
tenant with the least recent CPU time in it, each tenant's in arrival order; and hands each
step's result or exception to its caller."""

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


class Burner:
    """A CPU clock the steps move: each step "uses" the seconds it is given."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return self.seconds

    def step(self, label: str, seconds: float, ran: list[str]) -> None:
        self.seconds += seconds
        ran.append(label)


def test_within_a_class_the_tenant_with_least_recent_cpu_time_goes_next() -> None:
    """Issue 42: a key's decodes queued ahead of another key's ran first, however much CPU
    they took. Tenant a's first step takes 5 s of CPU: b's step, queued after a's next two,
    runs before them; a's own run in order; the class still comes first."""
    cpu = Burner()
    pool = PriorityPool(1, cpu=cpu, clock=lambda: 0.0)
    gate, started, ran = threading.Event(), threading.Event(), list[str]()

    def hold() -> None:
        started.set()
        gate.wait(10)
        cpu.step("a0", 5.0, ran)

    first = pool.at(1, "a").submit(hold)
    assert started.wait(10)  # a0 holds the one thread while the rest queue up
    queued = [(1, "a", "a1"), (1, "a", "a2"), (1, "b", "b1"), (0, "a", "a-sync")]
    steps = [
        pool.at(priority, tenant).submit(cpu.step, label, 0.1, ran)
        for priority, tenant, label in queued
    ]
    gate.set()
    first.result(timeout=10)
    for future in steps:
        future.result(timeout=10)
    assert ran == ["a0", "a-sync", "b1", "a1", "a2"]
    pool.shutdown()
