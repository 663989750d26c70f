"""The deployment's nodes: which worker nodes are alive (:class:`WorkerRegistry`) and which
node runs the cluster-wide duties (:class:`Lease`).

Embedded, the deployment is this one process: ``local.py`` lists only what this node
reported and always holds the lease. Distributed, ``redis.py`` shares both through Redis.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from asrserve.cluster.merge import merge

log = logging.getLogger(__name__)

Duties = Callable[[], Awaitable[None]]
DUTY_RESTART_S = 5.0


async def supervised(name: str, duty: Duties, restart_s: float = DUTY_RESTART_S) -> None:
    """Run one duty for ever: when it fails it alone starts again ``restart_s`` later, so
    that one duty's failure (a batch that breaks the runner) never stops the others."""
    while True:
        try:
            await duty()
        except Exception:
            log.exception("the %s duty failed; restarting it in %.0f s", name, restart_s)
        await asyncio.sleep(restart_s)  # a back-off: there is nothing to wait on


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

    async def device_cost(self) -> float | None:
        """Device seconds per audio second of every live worker node together."""
        cost: float | None = merge(await self.alive())["device_s_per_audio_s"]
        return cost


class Lease(ABC):
    """The right to run the duties that must not run twice at once (the Batch API runner,
    the webhook sender, the audio retention sweep)."""

    @abstractmethod
    async def run(self, duties: Duties) -> None:
        """Run ``duties`` whenever this node holds the lease, again after they fail; until
        cancelled."""
