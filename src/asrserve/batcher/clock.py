"""Time as the scheduler sees it: injected, so tests drive it without real sleeps."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from typing import Protocol

from asrserve.waiting import wait_event


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds, from any thread (a device's thread reads it between passes)."""

    async def wait(self, event: asyncio.Event, deadline: float) -> None:
        """Return when ``event`` is set or ``now() >= deadline``, whichever comes first."""


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()  # the event loop's own time(), readable outside the loop

    async def wait(self, event: asyncio.Event, deadline: float) -> None:
        timeout = deadline - self.now()
        if timeout <= 0 or event.is_set():
            return
        await wait_event(event, None if math.isinf(timeout) else timeout)


class ManualClock:
    """A clock that moves only when a test calls :meth:`advance`."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, asyncio.Event]] = []
        self._ids = itertools.count()

    def now(self) -> float:
        return self._now

    async def wait(self, event: asyncio.Event, deadline: float) -> None:
        if event.is_set() or deadline <= self._now:
            return
        timer = asyncio.Event()
        heapq.heappush(self._timers, (deadline, next(self._ids), timer))
        waiters = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(timer.wait())]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    def advance(self, seconds: float) -> None:
        self.advance_to(self._now + seconds)

    def advance_to(self, when: float) -> None:
        """Move to ``when`` exactly (a test replaying a timeline must not drift by
        rounding ``now + (when - now)``), firing every timer due by then."""
        self._now = max(self._now, when)
        while self._timers and self._timers[0][0] <= self._now:
            heapq.heappop(self._timers)[2].set()

    def next_timer(self) -> float | None:
        """The earliest deadline a waiter set (it may have returned on its event since)."""
        return self._timers[0][0] if self._timers else None
