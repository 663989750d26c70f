"""Admission counts in memory: one process admits every job (embedded)."""

from __future__ import annotations

from asrserve.admission.base import Admission, Backlog
from asrserve.cluster.base import WorkerRegistry
from asrserve.jobs.models import Job, Priority
from asrserve.settings import Settings


class LocalAdmission(Admission):
    def __init__(self, settings: Settings, registry: WorkerRegistry) -> None:
        super().__init__(settings, registry)
        self._backlog = {priority: Backlog() for priority in Priority}

    async def backlog(self, priority: Priority) -> Backlog:
        return self._backlog[priority]

    async def added(self, priority: Priority, audio_s: float, count: int = 1) -> None:
        backlog = self._backlog[priority]
        backlog.jobs += count
        backlog.audio_s += audio_s

    async def finished(self, job: Job) -> None:
        backlog = self._backlog[job.priority]
        backlog.jobs = max(backlog.jobs - 1, 0)
        backlog.audio_s = max(backlog.audio_s - job.admitted_s, 0.0)

    async def _replace(self, backlogs: dict[Priority, Backlog]) -> None:
        self._backlog = backlogs
