"""The one poll loop of the suite, for watching what the test cannot subscribe to: another
process's state over HTTP, its log, its files."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    what: str | Callable[[], str],
    every: float = 0.2,
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that. ``timeout`` is
    a generous bound on another process, not a timing claim; ``what`` (or what it returns,
    read at the failure) names what was awaited, with whatever helps to see why not."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() >= deadline:
            detail = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for {detail}")
        time.sleep(every)  # polling: nothing to subscribe to
    return value
