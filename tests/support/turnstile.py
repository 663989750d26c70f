"""A gate for :class:`~tests.support.fakes.FakeEngine`'s forward passes that lets them
through one at a time: put in place of ``engine.gate``, ``hold()`` stops every pass at the
engine, ``let(n)`` lets the next ``n`` through, ``allow_one()`` at most one, ``set()`` opens
it for all. The tests see how many passes wait there, so they know the device is taken
without timing it."""

from __future__ import annotations

import threading

HOLD_LIMIT_S = 60.0  # a bound for a broken test, not a timing claim: then the pass goes on


class Turnstile(threading.Event):
    """Open (``set``) until ``hold()``; while held, each pass takes a ticket from ``let``."""

    def __init__(self) -> None:
        super().__init__()
        self._cond = threading.Condition()
        self._open = True
        self._tickets = 0
        self.waiting = 0  # passes stopped here now
        self.passed = 0  # passes let through so far

    def is_set(self) -> bool:
        with self._cond:
            return self._open

    def set(self) -> None:
        with self._cond:
            self._open = True
            self._cond.notify_all()

    def clear(self) -> None:
        self.hold()

    def hold(self) -> None:
        with self._cond:
            self._open, self._tickets = False, 0

    def let(self, passes: int = 1) -> None:
        with self._cond:
            self._tickets += passes
            self._cond.notify_all()

    def allow_one(self) -> None:
        """Let one pass through, unless one let through has not gone yet (asked again and
        again while a test polls, it lets them through one at a time)."""
        with self._cond:
            self._tickets = 1
            self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """What the engine calls before each pass (its own ``timeout`` is ignored: a held
        pass waits for the test, at most :data:`HOLD_LIMIT_S`)."""
        with self._cond:
            self.waiting += 1
            self._cond.notify_all()
            try:
                through = self._cond.wait_for(lambda: self._open or self._tickets > 0, HOLD_LIMIT_S)
                if through and not self._open:
                    self._tickets -= 1
                self.passed += 1
                return through
            finally:
                self.waiting -= 1
                self._cond.notify_all()

    def until_waiting(self, passes: int = 1) -> None:
        """Return once ``passes`` passes are stopped here."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.waiting >= passes, HOLD_LIMIT_S):
                raise AssertionError(f"{self.waiting} passes reached the engine, not {passes}")
