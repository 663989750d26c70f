"""The queue protocol: at-least-once delivery of job ids, by priority then arrival."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from asrserve.jobs.models import Priority


@dataclass(frozen=True)
class Delivery:
    job_id: str
    priority: Priority
    deliveries: int  # times this entry has been handed out, this one included


class Queue(ABC):
    @abstractmethod
    async def put(self, job_id: str, priority: Priority) -> None:
        """Idempotent: putting an id that is already queued leaves one entry."""

    @abstractmethod
    async def _claim(self, max_items: int) -> list[Delivery]:
        """Claim up to ``max_items`` ready entries without waiting."""

    @abstractmethod
    async def _wait(self, timeout: float) -> None:
        """Block until something may be ready (or ``timeout`` passes)."""

    @abstractmethod
    def _arm(self) -> None:
        """Prepare a wake-up before claiming, so a put between claim and wait is not missed."""

    @abstractmethod
    async def ack(self, delivery: Delivery) -> None:
        """Done: the result is durably stored. Removes the entry."""

    @abstractmethod
    async def release(self, delivery: Delivery) -> None:
        """Hand a claimed entry back unfinished (shutdown); it is delivered again later."""

    @abstractmethod
    async def recover(self) -> int:
        """At start-up: return entries claimed by consumers that are gone. Returns a count."""

    @abstractmethod
    async def depth(self) -> dict[Priority, int]:
        """Ready (unclaimed) entries by priority."""

    async def get(self, max_items: int, timeout: float) -> list[Delivery]:
        """Claim up to ``max_items``; block up to ``timeout`` seconds for the first one."""
        deadline = time.monotonic() + timeout
        while True:
            self._arm()
            items = await self._claim(max_items)
            remaining = deadline - time.monotonic()
            if items or remaining <= 0:
                return items
            await self._wait(remaining)

    async def close(self) -> None:
        return None
