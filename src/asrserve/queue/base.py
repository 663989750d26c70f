"""The queue protocol: at-least-once delivery of job ids, by priority then arrival."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from asrserve.vocabulary import Priority


@dataclass(frozen=True)
class Delivery:
    job_id: str
    priority: Priority
    deliveries: int  # times this entry has been handed out, this one included
    receipt: str = ""  # the backend's handle on this entry (a stream entry id)


class Queue(ABC):
    @abstractmethod
    async def put(self, job_id: str, priority: Priority) -> None:
        """Idempotent: putting an id that is already queued leaves one entry."""

    @abstractmethod
    async def _claim(self, limits: Mapping[Priority, int], total: int) -> list[Delivery]:
        """Without waiting, claim ready entries, most urgent priority first: at most
        ``limits[p]`` of priority ``p`` and ``total`` in all."""

    @abstractmethod
    async def _wait(
        self, token: object, limits: Mapping[Priority, int], total: int, timeout: float
    ) -> list[Delivery]:
        """Block until something may have been put since ``token`` was armed (or timeout).

        A backend whose wait is itself a read (Redis: ``XREADGROUP BLOCK``) claims there,
        within the same limits: what it returns is handed out. Others return nothing and
        the caller claims again."""

    @abstractmethod
    def _arm(self) -> object:
        """A wake-up token taken before claiming, so a put between claim and wait is not
        missed (each caller has its own: concurrent consumers cannot disarm each other)."""

    @abstractmethod
    async def ack(self, delivery: Delivery) -> None:
        """Done: the result is durably stored. Removes the entry."""

    @abstractmethod
    async def release(self, delivery: Delivery) -> None:
        """Hand a claimed entry back unfinished (shutdown); it is delivered again later."""

    async def dead_letter(self, delivery: Delivery, reason: str) -> None:
        """Give up on an entry that keeps failing: remove it, keeping a record where the
        backend has one (a dead-letter stream)."""
        await self.ack(delivery)

    async def extend(self, deliveries: Sequence[Delivery]) -> None:
        """Heartbeat: these entries are still being worked on (renews their lease)."""
        return None

    @abstractmethod
    async def discard(self, job_ids: Sequence[str], priority: Priority) -> None:
        """Remove the entries of these jobs of ``priority`` that no consumer holds: jobs
        that finished before they ran (a cancelled batch's), so that no consumer claims,
        reads and acknowledges each of them in turn. An entry a consumer holds is left to
        it; an id with no entry is ignored."""

    @abstractmethod
    async def recover(self) -> int:
        """At start-up: return entries claimed by consumers that are gone. Returns a count."""

    @abstractmethod
    async def depth(self) -> dict[Priority, int]:
        """Ready (unclaimed) entries by priority."""

    async def put_many(self, job_ids: Sequence[str], priority: Priority) -> None:
        """Enqueue in this order (entries of one priority are claimed oldest first)."""
        for job_id in job_ids:
            await self.put(job_id, priority)

    async def get(
        self, limits: int | Mapping[Priority, int], timeout: float, total: int | None = None
    ) -> list[Delivery]:
        """Claim up to ``limits`` entries (a total, or a cap per priority; at most ``total``
        in all if given), most urgent first; block up to ``timeout`` seconds for the first."""
        caps = dict.fromkeys(Priority, limits) if isinstance(limits, int) else dict(limits)
        if total is None:
            total = limits if isinstance(limits, int) else sum(caps.values())
        caps = {p: n for p, n in caps.items() if n > 0}
        deadline = time.monotonic() + timeout
        while True:
            token = self._arm()
            items = await self._claim(caps, total) if caps else []
            remaining = deadline - time.monotonic()
            if items or remaining <= 0:
                return items
            items = await self._wait(token, caps, total, remaining)
            if items:
                return items

    async def close(self) -> None:
        return None
