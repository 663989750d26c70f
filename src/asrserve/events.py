"""Completion and cancel events: waiters wake when a job finishes, never by polling.

In-process by default. In the distributed mode :class:`asrserve.distributed.events.
RedisEvents` carries the same events between nodes over Redis pub/sub.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Finished:
    """A job reached a final state: who else must hear of it."""

    job_id: str
    batch_id: str | None = None  # the Batch API runner
    callback: bool = False  # the webhook sender


class JobEvents:
    def __init__(self) -> None:
        self._waiters: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self._cancel_listeners: list[Callable[[str], None]] = []
        self._finish_listeners: list[Callable[[Finished], None]] = []
        self._batch_listeners: list[Callable[[], None]] = []
        self._resync_listeners: list[Callable[[], None]] = []

    @contextlib.contextmanager
    def subscribe(self, job_id: str) -> Iterator[asyncio.Event]:
        """Subscribe *before* reading the job's state, so no completion is missed."""
        event = asyncio.Event()
        self._waiters[job_id].add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(job_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[job_id]

    def finished(self, notice: Finished) -> None:
        self._wake(notice.job_id)
        for listener in self._finish_listeners:
            listener(notice)

    def cancelled(self, job_id: str) -> None:
        for listener in self._cancel_listeners:
            listener(job_id)
        self._wake(job_id)

    def batch_api_changed(self) -> None:
        """A batch was created or cancelled: the Batch API runner looks again."""
        for listener in self._batch_listeners:
            listener()

    def on_batch_api_changed(self, listener: Callable[[], None]) -> None:
        self._batch_listeners.append(listener)

    def on_resync(self, listener: Callable[[], None]) -> None:
        """Called when events may have been missed (a lost connection to other nodes)."""
        self._resync_listeners.append(listener)

    def on_cancel(self, listener: Callable[[str], None]) -> None:
        self._cancel_listeners.append(listener)

    def on_finish(self, listener: Callable[[Finished], None]) -> None:
        self._finish_listeners.append(listener)

    def wake_all(self) -> None:
        """Every waiter re-reads its job (after events may have been missed)."""
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()

    def _wake(self, job_id: str) -> None:
        for event in self._waiters.get(job_id, ()):
            event.set()
