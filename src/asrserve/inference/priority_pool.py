"""A thread pool that runs the most urgent waiting step first.

The preprocessing pool (decode, VAD, log-mel) is shared by every job a lane has in flight. A
plain ``ThreadPoolExecutor`` runs steps in the order they were submitted, so an interactive
request's decode waits behind every async job's decode and window features queued before
it: under another tenant's flood of async jobs, that wait, not the devices, was most of a
sync request's time (``docs/benchmarks.md``, the hostile soak). Here each step carries its
job's priority class (lower runs first, as ``Priority`` orders them) and, within a class,
runs in submission order. A step that runs is never interrupted.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(order=True)
class _Step:
    priority: int
    seq: int
    future: Future[Any] = field(compare=False)
    call: Callable[[], Any] = field(compare=False)


class PriorityPool(Executor):
    """``threads`` worker threads over one queue ordered by (priority, arrival). ``submit``
    runs at ``default`` priority; :meth:`at` gives an executor that submits at another."""

    def __init__(self, threads: int, name: str = "pool", default: int = 0) -> None:
        if threads < 1:
            raise ValueError("a pool needs at least one thread")
        self._default = default
        self._queue: list[_Step] = []
        self._seq = itertools.count()
        self._ready = threading.Condition()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True)
            for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        return self.submit_at(self._default, lambda: fn(*args, **kwargs))

    def submit_at(self, priority: int, call: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("cannot schedule new work after shutdown")
            heapq.heappush(self._queue, _Step(priority, next(self._seq), future, call))
            self._ready.notify()
        return future

    def at(self, priority: int) -> Executor:
        """An executor whose steps run at ``priority`` in this pool."""
        return _At(self, priority)

    def waiting(self) -> int:
        with self._ready:
            return len(self._queue)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._ready:
            self._closed = True
            if cancel_futures:
                for step in self._queue:
                    step.future.cancel()
                self._queue.clear()
            self._ready.notify_all()
        if wait:
            for thread in self._threads:
                thread.join()

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    return  # closed, and nothing left to run
                step = heapq.heappop(self._queue)
            if not step.future.set_running_or_notify_cancel():
                continue
            try:
                result = step.call()
            except BaseException as exc:  # handed to the waiting caller, as an executor does
                step.future.set_exception(exc)
            else:
                step.future.set_result(result)


class _At(Executor):
    def __init__(self, pool: PriorityPool, priority: int) -> None:
        self._pool, self._priority = pool, priority

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        return self._pool.submit_at(self._priority, lambda: fn(*args, **kwargs))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """The pool is shut down by its owner, not by one of its views."""
