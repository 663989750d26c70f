"""In-process completion events: waiters wake when a job finishes, never by polling."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterator


class JobEvents:
    def __init__(self) -> None:
        self._waiters: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self._cancel_listeners: list[Callable[[str], None]] = []

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

    def finished(self, job_id: str) -> None:
        for event in self._waiters.get(job_id, ()):
            event.set()

    def on_cancel(self, listener: Callable[[str], None]) -> None:
        self._cancel_listeners.append(listener)

    def cancelled(self, job_id: str) -> None:
        for listener in self._cancel_listeners:
            listener(job_id)
        self.finished(job_id)
