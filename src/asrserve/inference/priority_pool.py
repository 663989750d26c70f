"""A thread pool that runs the most urgent waiting step first, sharing it fairly across keys.

The preprocessing pool (decode, VAD, log-mel) is shared by every job a lane has in flight. A
plain ``ThreadPoolExecutor`` runs steps in the order they were submitted, so an interactive
request's decode waits behind every async job's decode and window features queued before
it: under another tenant's flood of async jobs, that wait, not the devices, was most of a
sync request's time (``docs/benchmarks.md``, the hostile soak). Here each step carries its
job's priority class (lower runs first, as ``Priority`` orders them) and its tenant (the API
key it is for). Within a class, the tenant whose steps took the least CPU time lately runs
next (each step's thread CPU time is charged to its tenant, halving every 10 s, as the
devices' shares do), and a tenant's own steps run in submission order. A step that runs is
never interrupted.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from asrserve.batcher.shares import NOBODY, DeviceShares

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class _Step:
    tenant: str
    future: Future[Any]
    call: Callable[[], Any]


class PriorityPool(Executor):
    """``threads`` worker threads over queues by (priority, tenant). ``submit`` runs at
    ``default`` priority for no tenant; :meth:`at` gives an executor that submits at
    another priority, for a tenant. ``cpu`` reads the calling thread's CPU seconds and
    ``clock`` the time the shares decay by (injected in tests)."""

    def __init__(
        self,
        threads: int,
        name: str = "pool",
        default: int = 0,
        cpu: Callable[[], float] = time.thread_time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if threads < 1:
            raise ValueError("a pool needs at least one thread")
        self._default = default
        self._queues: dict[int, dict[str, deque[_Step]]] = {}  # priority -> tenant -> steps
        self._ready = threading.Condition()
        self._closed = False
        self._cpu, self._clock = cpu, clock
        self.shares = DeviceShares()  # each tenant's recent CPU seconds in this pool
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True)
            for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        return self.submit_at(self._default, lambda: fn(*args, **kwargs))

    def submit_at(self, priority: int, call: Callable[[], T], tenant: str = NOBODY) -> Future[T]:
        future: Future[T] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("cannot schedule new work after shutdown")
            tenants = self._queues.setdefault(priority, {})
            tenants.setdefault(tenant, deque()).append(_Step(tenant, future, call))
            self._ready.notify()
        return future

    def at(self, priority: int, tenant: str = NOBODY) -> Executor:
        """An executor whose steps run at ``priority`` in this pool, for ``tenant``."""
        return _At(self, priority, tenant)

    def waiting(self) -> int:
        with self._ready:
            return sum(len(steps) for q in self._queues.values() for steps in q.values())

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._ready:
            self._closed = True
            if cancel_futures:
                for tenants in self._queues.values():
                    for steps in tenants.values():
                        for step in steps:
                            step.future.cancel()
                self._queues.clear()
            self._ready.notify_all()
        if wait:
            for thread in self._threads:
                thread.join()

    def _next(self) -> _Step:
        """The most urgent class's step of the tenant with the least recent CPU time (called
        with the lock held, the queues not empty)."""
        priority = min(self._queues)
        tenants = self._queues[priority]
        usage = self.shares.standing(tenants, self._clock())
        tenant = min(tenants, key=usage.__getitem__)
        steps = tenants[tenant]
        step = steps.popleft()
        if not steps:
            del tenants[tenant]
            if not tenants:
                del self._queues[priority]
        return step

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._queues and not self._closed:
                    self._ready.wait()
                if not self._queues:
                    return  # closed, and nothing left to run
                step = self._next()
            if not step.future.set_running_or_notify_cancel():
                continue
            started = self._cpu()
            try:
                result = step.call()
            except BaseException as exc:  # handed to the waiting caller, as an executor does
                step.future.set_exception(exc)
            else:
                step.future.set_result(result)
            finally:
                with self._ready:
                    spent = self._cpu() - started
                    self.shares.charge([step.tenant], [1], spent, self._clock())


class _At(Executor):
    def __init__(self, pool: PriorityPool, priority: int, tenant: str) -> None:
        self._pool, self._priority, self._tenant = pool, priority, tenant

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        return self._pool.submit_at(self._priority, lambda: fn(*args, **kwargs), self._tenant)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """The pool is shut down by its owner, not by one of its views."""
