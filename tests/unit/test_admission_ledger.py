"""The admission backlog takes off exactly what it added, whatever happens to a job.

A job is admitted with the duration its container states (or none); its stored duration
later becomes what was decoded. Random sequences of accept, succeed (with a decoded length
unlike the stated one), fail, cancel and restart, on SQLite with the in-memory counts and
on Redis with the shared counts, must keep the backlog equal to what the unfinished jobs
were admitted with after every step, and leave it empty once every job has ended.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from asrserve.admission.base import Admission
from asrserve.admission.local import LocalAdmission
from asrserve.admission.redis import RedisAdmission
from asrserve.cluster.local import LocalRegistry
from asrserve.cluster.redis import RedisRegistry
from asrserve.drivers.redis import connect
from asrserve.drivers.sqlite import Database
from asrserve.jobs.models import Job, JobError
from asrserve.jobs.redis import RedisJobStore
from asrserve.jobs.sqlite import SqliteJobStore
from asrserve.jobs.store import JobStore
from asrserve.settings import Settings
from asrserve.transcript import Transcript
from asrserve.vocabulary import Priority
from tests.support.loop import Run

SETTINGS = Settings()
seconds = st.floats(min_value=0.1, max_value=14_400.0, allow_nan=False)
accept = st.tuples(
    st.just("accept"), st.sampled_from(list(Priority)), st.none() | seconds, st.just(0)
)
end = st.tuples(
    st.sampled_from(["succeed", "fail", "cancel"]), st.just(None), seconds, st.integers(0, 20)
)
restart = st.tuples(st.just("restart"), st.just(None), st.just(None), st.just(0))
operations = st.lists(st.one_of(accept, end, restart), max_size=40)
_prefixes = itertools.count()


class Ledger:
    """Accept and end jobs as the service and the worker do, on one store and admission."""

    def __init__(self, store: JobStore, admission: Admission) -> None:
        self.store = store
        self.admission = admission
        self.ids: list[str] = []

    async def accept(self, priority: Priority, stated: float | None) -> None:
        job = Job(
            id=f"job_{len(self.ids)}",
            priority=priority,
            audio_duration=stated,
            admitted_s=stated or 0.0,
        )
        await self.store.create(job)
        await self.admission.added(priority, job.admitted_s)
        self.ids.append(job.id)

    async def end(self, how: str, job_id: str, decoded: float) -> None:
        if how == "succeed":
            transcript = Transcript(language="en", duration=decoded, segments=[])
            done = await self.store.succeed(job_id, transcript)
        elif how == "fail":
            error = JobError(status=415, code="unsupported_audio", message="x")
            done = await self.store.fail(job_id, error)
        else:
            done = await self.store.cancel(job_id)
        if done is not None:  # ended just now (a second end of a job changes nothing)
            await self.admission.finished(done)

    async def restart(self) -> None:
        await self.admission.reset(await self.store.unfinished())

    async def play(self, steps: list[tuple[str, Priority | None, float | None, int]]) -> None:
        for how, priority, value, pick in steps:
            if how == "accept":
                assert priority is not None
                await self.accept(priority, value)
            elif how == "restart":
                await self.restart()
            elif self.ids:
                assert value is not None
                await self.end(how, self.ids[pick % len(self.ids)], value)
            await self.check()
        for job in await self.store.unfinished():
            await self.end("cancel", job.id, 0.0)

    async def check(self) -> None:
        """The backlog is what the unfinished jobs were admitted with, class by class."""
        unfinished = await self.store.unfinished()
        view = await self.admission.view()
        for priority in Priority:
            mine = [job for job in unfinished if job.priority is priority]
            backlog = view[priority.name.lower()]
            assert backlog["jobs"] == len(mine)
            expected = sum(job.admitted_s for job in mine)
            assert backlog["audio_s"] == pytest.approx(expected, abs=0.1)


def assert_empty(view: dict[str, dict[str, float]]) -> None:
    for backlog in view.values():
        assert backlog["jobs"] == 0
        assert backlog["audio_s"] == pytest.approx(0.0, abs=0.05)


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=operations)
def test_embedded_backlog_ends_at_zero(
    run: Run, steps: list[tuple[str, Priority | None, float | None, int]]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        db = Database(Path(folder) / "jobs.db")
        try:
            ledger = Ledger(SqliteJobStore(db), LocalAdmission(SETTINGS, LocalRegistry()))
            run(ledger.play(steps))
            assert_empty(run(ledger.admission.view()))
        finally:
            db.close()


@hypothesis_settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=operations)
def test_redis_backlog_ends_at_zero(
    run: Run, redis_url: str, steps: list[tuple[str, Priority | None, float | None, int]]
) -> None:
    client = connect(redis_url)
    prefix = f"ledger{next(_prefixes)}"
    try:
        registry = RedisRegistry(client, prefix, lease_s=30.0)
        admission = RedisAdmission(SETTINGS, client, prefix, registry)
        ledger = Ledger(RedisJobStore(client, prefix, 3600.0), admission)
        run(ledger.play(steps))
        assert_empty(run(ledger.admission.view()))
    finally:
        run(client.aclose())


def test_a_header_that_overstates_the_audio_leaves_nothing_behind(run: Run) -> None:
    """The reported case: stated 3.999 h, decoded 110 s; the backlog must go back to zero."""
    with tempfile.TemporaryDirectory() as folder:
        db = Database(Path(folder) / "jobs.db")
        try:
            ledger = Ledger(SqliteJobStore(db), LocalAdmission(SETTINGS, LocalRegistry()))
            run(ledger.accept(Priority.ASYNC, 3.999 * 3600))
            assert run(ledger.admission.view())["async"]["audio_s"] == pytest.approx(14396.4)
            run(ledger.end("succeed", ledger.ids[0], 110.0))
            assert run(ledger.admission.view())["async"] == {"jobs": 0, "audio_s": 0.0}
        finally:
            db.close()
