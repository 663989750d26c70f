"""The embedded deployment: one process, so the registry lists only what this node
reported (kept in memory, sent nowhere) and this node always holds the lease."""

from __future__ import annotations

import logging
import time
from typing import Any

from asrserve.cluster.base import Duties, Lease, WorkerRegistry, supervised

log = logging.getLogger(__name__)

DUTIES_RESTART_S = 5.0


class LocalRegistry(WorkerRegistry):
    def __init__(self) -> None:
        self._reports: dict[str, dict[str, Any]] = {}

    async def report(self, node: str, view: dict[str, Any]) -> None:
        self._reports[node] = {**view, "node": node, "reported_at": time.time()}

    async def forget(self, node: str) -> None:
        self._reports.pop(node, None)

    async def alive(self) -> list[dict[str, Any]]:
        return [self._reports[node] for node in sorted(self._reports)]


class LocalLease(Lease):
    """Always held: the duties run here, restarted ``restart_s`` after they fail (each duty
    also restarts alone inside them: ``supervised``)."""

    def __init__(self, restart_s: float = DUTIES_RESTART_S) -> None:
        self._restart_s = restart_s

    async def run(self, duties: Duties) -> None:
        await supervised("leader's", duties, self._restart_s)
