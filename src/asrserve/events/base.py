"""Job events: waiters wake when a job progresses or finishes, never by polling.

:class:`JobEvents` is what the service, the consumer and the leader's duties use. Every
implementation delivers an event to this process's waiters and listeners through one
:class:`Listeners` it holds (composition): ``local.py`` does only that (embedded), ``redis.py``
also carries each event to the other nodes, and delivers theirs here the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Finished:
    """A job reached a final state: who else must hear of it."""

    job_id: str
    batch_id: str | None = None  # the Batch API runner
    callback: bool = False  # the webhook sender


class Listeners:
    """This process's waiters and listeners, and how an event reaches them."""

    def __init__(self) -> None:
        self._waiters: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self.cancel_listeners: list[Callable[[str], None]] = []
        self.finish_listeners: list[Callable[[Finished], None]] = []
        self.batch_listeners: list[Callable[[], None]] = []
        self.resync_listeners: list[Callable[[], None]] = []

    @contextlib.contextmanager
    def subscribe(self, job_id: str) -> Iterator[asyncio.Event]:
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
        for listener in self.finish_listeners:
            listener(notice)

    def progressed(self, job_id: str) -> None:
        self._wake(job_id)

    def batch_ended(self, batch_id: str) -> None:
        self._wake(batch_id)

    def cancelled(self, job_id: str) -> None:
        for listener in self.cancel_listeners:
            listener(job_id)
        self._wake(job_id)

    def batch_api_changed(self) -> None:
        for listener in self.batch_listeners:
            listener()

    def resynced(self) -> None:
        """Events may have been missed: every waiter re-reads its job, every resync listener
        looks again."""
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()
        for listener in self.resync_listeners:
            listener()

    def _wake(self, job_id: str) -> None:
        for event in self._waiters.get(job_id, ()):
            event.set()


class JobEvents(ABC):
    def __init__(self) -> None:
        self._local = Listeners()

    def subscribe(self, job_id: str) -> contextlib.AbstractContextManager[asyncio.Event]:
        """An event set when the job progresses, finishes or is cancelled. Subscribe
        *before* reading the job's state, so no change is missed."""
        return self._local.subscribe(job_id)

    @abstractmethod
    def finished(self, notice: Finished) -> None:
        """A job reached a final state (its result is stored)."""

    @abstractmethod
    def progressed(self, job_id: str) -> None:
        """A running job's stored progress changed: its followers read it again."""

    @abstractmethod
    def batch_ended(self, batch_id: str) -> None:
        """A Batch API batch reached a final state: its waiters (subscribed by its id)
        read it again."""

    @abstractmethod
    def cancelled(self, job_id: str) -> None:
        """A job was cancelled: whoever runs it drops it."""

    @abstractmethod
    def batch_api_changed(self) -> None:
        """A batch was created or cancelled: the Batch API runner looks again."""

    def on_cancel(self, listener: Callable[[str], None]) -> None:
        self._local.cancel_listeners.append(listener)

    def on_finish(self, listener: Callable[[Finished], None]) -> None:
        self._local.finish_listeners.append(listener)

    def on_batch_api_changed(self, listener: Callable[[], None]) -> None:
        self._local.batch_listeners.append(listener)

    def on_resync(self, listener: Callable[[], None]) -> None:
        """Called when events may have been missed (a lost connection to other nodes)."""
        self._local.resync_listeners.append(listener)
