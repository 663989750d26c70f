"""Admission counts in memory: one process admits every job (embedded)."""

from __future__ import annotations

from asrserve.admission.base import Admission, Backlog, Held
from asrserve.cluster.base import WorkerRegistry
from asrserve.jobs.models import Job
from asrserve.settings.admission import AdmissionSettings
from asrserve.vocabulary import Priority


class LocalAdmission(Admission):
    def __init__(self, settings: AdmissionSettings, registry: WorkerRegistry) -> None:
        super().__init__(settings, registry)
        self._backlog = {priority: Backlog() for priority in Priority}
        self._held: Held = {}

    async def backlog(self, priority: Priority) -> Backlog:
        return self._backlog[priority]

    async def held(self, priority: Priority, owner: str) -> Backlog:
        return self._held.get((priority, owner), Backlog())

    async def added(
        self, priority: Priority, audio_s: float, count: int = 1, owner: str | None = None
    ) -> None:
        counts = [self._backlog[priority]]
        if owner is not None:
            counts.append(self._held.setdefault((priority, owner), Backlog()))
        for backlog in counts:
            backlog.jobs += count
            backlog.audio_s += audio_s

    async def finished(self, job: Job) -> None:
        _subtract(self._backlog[job.priority], job.admitted_s)
        if job.owner is None:
            return
        key = (job.priority, job.owner)
        held = self._held.get(key)
        if held is not None and _subtract(held, job.admitted_s) == 0:
            del self._held[key]  # the map holds only keys with work

    async def _replace(self, backlogs: dict[Priority, Backlog], held: Held) -> None:
        self._backlog = backlogs
        self._held = held


def _subtract(backlog: Backlog, audio_s: float) -> int:
    backlog.jobs = max(backlog.jobs - 1, 0)
    backlog.audio_s = max(backlog.audio_s - audio_s, 0.0)
    return backlog.jobs
