"""The type of the unit tests' ``run`` fixture (tests/unit/conftest.py)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Run(Protocol):
    """The ``run`` fixture: runs a coroutine on the test's one event loop."""

    def __call__(self, coro: Awaitable[T], /) -> T: ...
