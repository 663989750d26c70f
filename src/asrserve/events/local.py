"""Events in one process (the embedded mode): delivered here, and nowhere else."""

from __future__ import annotations

from asrserve.events.base import Finished, JobEvents


class LocalEvents(JobEvents):
    def finished(self, notice: Finished) -> None:
        self._local.finished(notice)

    def progressed(self, job_id: str) -> None:
        self._local.progressed(job_id)

    def batch_ended(self, batch_id: str) -> None:
        self._local.batch_ended(batch_id)

    def cancelled(self, job_id: str) -> None:
        self._local.cancelled(job_id)

    def batch_api_changed(self) -> None:
        self._local.batch_api_changed()
