"""The deployment's nodes: which worker nodes are alive (:class:`WorkerRegistry`) and which
node runs the cluster-wide duties (:class:`Lease`).

Embedded, the deployment is this one process: ``local.py`` lists only what this node
reported and always holds the lease. Distributed, ``redis.py`` shares both through Redis.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

Duties = Callable[[], Awaitable[None]]


class WorkerRegistry(ABC):
    """What each worker node reports about itself, so that any API node can show the whole
    deployment and estimate how fast it drains."""

    @abstractmethod
    async def report(self, node: str, view: dict[str, Any]) -> None:
        """``node``'s latest scheduler view (it replaces the one before)."""

    @abstractmethod
    async def forget(self, node: str) -> None:
        """``node`` stopped: it is no longer listed."""

    @abstractmethod
    async def alive(self) -> list[dict[str, Any]]:
        """The live nodes' latest reports (with ``node`` and ``reported_at``), by node name."""

    async def throughput(self) -> float | None:
        """Measured audio seconds per second of every live worker together."""
        measured = [r["throughput"] for r in await self.alive() if r.get("throughput")]
        return sum(measured) if measured else None


class Lease(ABC):
    """The right to run the duties that must not run twice at once (the Batch API runner,
    the webhook sender, the audio retention sweep)."""

    @abstractmethod
    async def run(self, duties: Duties) -> None:
        """Run ``duties`` whenever this node holds the lease, again after they fail; until
        cancelled."""
