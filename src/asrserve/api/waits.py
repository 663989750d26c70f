"""Event streams and long polls held open per caller: each holds a connection (a descriptor)
for as long as it waits, so one caller may hold at most ``max_waits_per_key`` of them at once
(``GET /v1/jobs/{id}/events``, ``GET /v1/jobs/{id}?wait=``, ``GET /v1/batches/{id}?wait=``);
the next gets ``429 too_many_waits`` at once, with a ``Retry-After``. A caller is its API key,
or with auth off its client address (as for uploads).

Taken and given back on the event loop only, so plain counters need no lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from asrserve.errors import RateLimited

RETRY_AFTER_S = 5


class WaitGate:
    def __init__(self, per_key: int = 32) -> None:
        self.per_key = per_key
        self.by_key: dict[str, int] = {}

    def take(self, key: str) -> Callable[[], None]:
        """One more wait for ``key`` (:class:`RateLimited` past its share), and the
        function that gives it back (once, however often it is called)."""
        held = self.by_key.get(key, 0)
        if held >= self.per_key:
            raise RateLimited(
                f"you hold {held} event streams and long polls open at once, your share;"
                " close one or retry shortly",
                code="too_many_waits",
                retry_after=RETRY_AFTER_S,
            )
        self.by_key[key] = held + 1
        given = False

        def give_back() -> None:
            nonlocal given
            if given:
                return
            given = True
            left = self.by_key.pop(key) - 1
            if left:
                self.by_key[key] = left

        return give_back

    @contextlib.contextmanager
    def slot(self, key: str) -> Iterator[None]:
        """One wait held for the ``with`` block (a long poll)."""
        give_back = self.take(key)
        try:
            yield
        finally:
            give_back()


class HeldStream(StreamingResponse):
    """A streamed answer that gives its wait back when it ends, however it ends (also when
    the client is gone before the first byte: its body is then never read)."""

    def __init__(
        self,
        body: AsyncIterator[str],
        give_back: Callable[[], None],
        ended: Callable[[], Awaitable[None]],
        **kwargs: Any,
    ) -> None:
        super().__init__(body, **kwargs)
        self._give_back = give_back
        self._ended = ended

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._give_back()
            await self._ended()
