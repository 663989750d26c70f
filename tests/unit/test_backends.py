"""One contract per protocol, run against every backend (SQLite and Redis)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from asrserve.drivers.sqlite import Database
from asrserve.jobs.models import (
    Job,
    JobError,
    JobStatus,
    PartialSegment,
    Progress,
    WebhookStatus,
    new_job_id,
    new_job_id_at,
)
from asrserve.jobs.redis import RedisJobStore
from asrserve.jobs.sqlite import SCHEMA, SqliteJobStore
from asrserve.jobs.store import JobStore
from asrserve.queue.base import Queue
from asrserve.queue.sqlite import SqliteQueue
from asrserve.vocabulary import TranscriptionOptions
from tests.support.contracts import QueueContract
from tests.support.fakes import transcript
from tests.support.loop import Run


class JobStoreContract:
    @pytest.fixture
    def store(self) -> JobStore:
        raise NotImplementedError

    def test_create_get_roundtrip(self, store: JobStore, run: Run) -> None:
        job = Job(id=new_job_id(), filename="a.wav", callback_url="http://example.test/x")
        run(store.create(job))
        assert run(store.get(job.id)) == job
        assert run(store.get("job_missing")) is None

    def test_options_keep_the_languages_detection_is_restricted_to(
        self, store: JobStore, run: Run
    ) -> None:
        options = TranscriptionOptions(model="base", languages=("de", "fr"))
        job = Job(id=new_job_id(), options=options)
        run(store.create(job))
        stored = run(store.get(job.id))
        assert stored is not None and stored.options.languages == ("de", "fr")

    def test_result_is_stored_exactly_once(self, store: JobStore, run: Run) -> None:
        job = Job(id=new_job_id())
        run(store.create(job))
        started = run(store.start(job.id))
        assert started is not None and started.status is JobStatus.RUNNING
        assert started.attempts == 1
        done = run(store.succeed(job.id, transcript()))
        assert done is not None and done.result is not None and done.result.text == "hi"
        assert run(store.succeed(job.id, transcript())) is None  # second completion: no-op
        assert run(store.fail(job.id, JobError(status=500, code="x", message="y"))) is None
        assert run(store.start(job.id)) is None
        stored = run(store.get(job.id))
        assert stored is not None and stored.status is JobStatus.SUCCEEDED

    def test_requeue_takes_back_only_the_latest_attempt(self, store: JobStore, run: Run) -> None:
        job = Job(id=new_job_id())
        run(store.create(job))
        started = run(store.start(job.id))
        assert started is not None and started.attempts == 1
        assert run(store.requeue(job.id, 2)) is None  # not this caller's attempt
        requeued = run(store.requeue(job.id, 1))
        assert requeued is not None and requeued.status is JobStatus.QUEUED
        assert requeued.attempts == 0 and requeued.started_at is None
        assert run(store.requeue(job.id, 0)) is None  # only a running job goes back

    def test_progress_is_kept_while_running_and_its_text_dropped_at_the_end(
        self, store: JobStore, run: Run
    ) -> None:
        job = Job(id=new_job_id())
        run(store.create(job))
        half = Progress(
            chunks_done=1,
            chunks_total=2,
            audio_done_s=30.0,
            audio_total_s=42.5,
            segments=(PartialSegment(id=0, start=0.0, end=2.5, text=" Hello."),),
        )
        assert run(store.report(job.id, half)) is None  # queued: no attempt is running
        run(store.start(job.id))
        reported = run(store.report(job.id, half))
        assert reported is not None and reported.progress == half
        stored = run(store.get(job.id))
        assert stored is not None and stored.progress == half
        done = run(store.succeed(job.id, transcript()))
        assert done is not None and done.progress is not None
        assert (done.progress.chunks_done, done.progress.audio_done_s) == (2, 42.5)
        assert done.progress.segments == ()
        assert run(store.report(job.id, half)) is None  # finished: nothing changes
        stored = run(store.get(job.id))
        assert stored is not None and stored.progress == done.progress

    def test_a_new_attempt_starts_its_progress_over(self, store: JobStore, run: Run) -> None:
        job = Job(id=new_job_id())
        run(store.create(job))
        run(store.start(job.id))
        run(store.report(job.id, Progress(chunks_done=1, chunks_total=3)))
        again = run(store.start(job.id))
        assert again is not None and again.attempts == 2 and again.progress is None

    def test_cancel_only_unfinished(self, store: JobStore, run: Run) -> None:
        job = Job(id=new_job_id())
        run(store.create(job))
        cancelled = run(store.cancel(job.id))
        assert cancelled is not None and cancelled.status is JobStatus.CANCELLED
        assert run(store.cancel(job.id)) is None
        assert run(store.succeed(job.id, transcript())) is None

    def test_page_newest_first_with_cursor_and_filter(self, store: JobStore, run: Run) -> None:
        ids = []
        for n in range(5):
            job = Job(id=f"job_{n:04d}")
            run(store.create(job))
            ids.append(job.id)
        run(store.cancel(ids[1]))
        first = run(store.page(limit=2))
        assert [j.id for j in first] == [ids[4], ids[3]]
        second = run(store.page(limit=2, after=first[-1].id))
        assert [j.id for j in second] == [ids[2], ids[1]]
        assert [j.id for j in run(store.page(status=JobStatus.CANCELLED))] == [ids[1]]
        assert {j.id for j in run(store.unfinished())} == set(ids) - {ids[1]}

    def test_webhooks_pending_and_recorded(self, store: JobStore, run: Run) -> None:
        job = Job(id=new_job_id(), callback_url="http://example.test/hook")
        run(store.create(job))
        run(store.succeed(job.id, transcript()))
        assert [j.id for j in run(store.webhooks_pending())] == [job.id]
        run(store.record_webhook(job.id, WebhookStatus.DELIVERED, None))
        assert run(store.webhooks_pending()) == []
        stored = run(store.get(job.id))
        assert stored is not None and stored.webhook_attempts == 1

    def test_audio_expiry(self, store: JobStore, run: Run) -> None:
        job = Job(id=new_job_id(), audio_path="/tmp/x")
        run(store.create(job))
        assert run(store.audio_expired(finished_before=1e18)) == []
        run(store.succeed(job.id, transcript()))
        assert [j.id for j in run(store.audio_expired(finished_before=1e18))] == [job.id]
        run(store.forget_audio(job.id))
        assert run(store.audio_expired(finished_before=1e18)) == []

    def test_batch_jobs_and_idempotent_create_many(self, store: JobStore, run: Run) -> None:
        jobs = [Job(id=f"job_b{i}", batch_id="batch_1", owns_audio=False) for i in range(3)]

        async def main() -> None:
            await store.create(Job(id=new_job_id()))  # not in the batch
            await store.create_many(jobs)
            await store.create_many(jobs)  # after a crash: nothing twice
            await store.succeed("job_b0", transcript())
            await store.fail("job_b1", JobError(status=415, code="x", message="y"))
            assert await store.batch_counts("batch_1") == {
                JobStatus.SUCCEEDED: 1,
                JobStatus.FAILED: 1,
                JobStatus.QUEUED: 1,
            }
            assert [j.id for j in await store.batch_jobs("batch_1")] == [
                "job_b0",
                "job_b1",
                "job_b2",
            ]
            unfinished = await store.batch_jobs("batch_1", unfinished=True)
            assert [j.id for j in unfinished] == ["job_b2"]
            # a batch item's audio is a stored file: never swept with the job
            assert await store.audio_expired(finished_before=1e18) == []

        run(main())

    def test_batch_backlog_sums_queued_audio_and_lists_running_jobs(
        self, store: JobStore, run: Run
    ) -> None:
        jobs = [
            Job(id=f"job_b{i}", batch_id="batch_1", owns_audio=False, admitted_s=10.0 * (i + 1))
            for i in range(4)
        ]

        async def main() -> None:
            await store.create(Job(id=new_job_id(), admitted_s=99.0))  # queued, not in the batch
            await store.create_many(jobs)
            await store.succeed("job_b0", transcript())
            await store.start("job_b1")
            backlog = await store.batch_backlog("batch_1")
            assert backlog.queued_s == 30.0 + 40.0
            assert [job.id for job in backlog.running] == ["job_b1"]

        run(main())


class TestSqliteJobStore(JobStoreContract):
    @pytest.fixture
    def store(self, database: Database) -> JobStore:
        return SqliteJobStore(database)

    def test_survives_reopen(self, tmp_path: Path, run: Run) -> None:
        db = Database(tmp_path / "x.db")
        job = Job(id=new_job_id())
        run(SqliteJobStore(db).create(job))
        db.close()
        db = Database(tmp_path / "x.db")
        assert run(SqliteJobStore(db).get(job.id)) == job
        db.close()

    def test_adds_columns_to_a_database_from_an_earlier_version(
        self, tmp_path: Path, run: Run
    ) -> None:
        db = Database(tmp_path / "old.db")
        old_schema = SCHEMA.replace(
            ",\n    batch_id TEXT,\n    owns_audio INTEGER NOT NULL DEFAULT 1", ""
        ).replace(",\n    progress TEXT", "")
        assert "owns_audio" not in old_schema and "progress" not in old_schema
        db.migrate(old_schema)
        db.run_sync(lambda c: c.execute(OLD_ROW))
        store = SqliteJobStore(db)
        old = run(store.get("job_old"))
        assert old is not None and old.owns_audio and old.batch_id is None
        assert old.options.languages == ()  # stored before keys had languages: any
        job = Job(
            id=new_job_id(),
            batch_id="batch_1",
            owns_audio=False,
            progress=Progress(chunks_done=1, chunks_total=2),
        )
        run(store.create(job))
        assert run(store.get(job.id)) == job
        db.close()


OLD_ROW = (
    "INSERT INTO jobs (id, status, priority, options, filename, audio_path, audio_bytes,"
    " created_at, attempts, webhook_attempts) VALUES"
    " ('job_old', 'succeeded', 1, '{}', 'a.wav', '', 0, 1.0, 1, 0)"
)


class TestSqliteQueue(QueueContract):
    @pytest.fixture
    def queue_factory(self, database: Database) -> Callable[[], Queue]:
        return lambda: SqliteQueue(database)


class TestRedisJobStore(JobStoreContract):
    @pytest.fixture
    def store(self, redis_client: aioredis.Redis) -> JobStore:
        return RedisJobStore(redis_client, "test", retention_s=100.0)

    def test_a_job_stored_before_languages_detects_among_all(
        self, store: JobStore, redis_client: aioredis.Redis, run: Run
    ) -> None:
        job = Job(id=new_job_id(), options=TranscriptionOptions(model="base"))
        run(store.create(job))
        document = json.loads(job.model_dump_json())
        del document["options"]["languages"]  # as the release before wrote it
        run(redis_client.set(f"test:job:{job.id}", json.dumps(document)))
        old = run(store.get(job.id))
        assert old == job and old.options.languages == ()

    def test_create_refuses_an_existing_id(self, store: JobStore, run: Run) -> None:
        job = Job(id=new_job_id())
        run(store.create(job))
        with pytest.raises(ValueError):
            run(store.create(job.model_copy(update={"filename": "other"})))
        assert run(store.get(job.id)) == job

    def test_retention_only_once_finished_and_notified(
        self, store: JobStore, redis_client: aioredis.Redis, run: Run
    ) -> None:
        plain, hooked = Job(id="job_1"), Job(id="job_2", callback_url="http://example.test/h")
        run(store.create_many([plain, hooked]))
        run(store.start("job_1"))
        assert run(redis_client.pttl("test:job:job_1")) == -1  # unfinished: never expires
        run(store.succeed("job_1", transcript()))
        assert 0 < run(redis_client.pttl("test:job:job_1")) <= 100_000
        run(store.cancel("job_2"))
        assert run(redis_client.pttl("test:job:job_2")) == -1  # its webhook is pending
        run(store.record_webhook("job_2", WebhookStatus.FAILED, "boom"))
        assert run(redis_client.pttl("test:job:job_2")) > 0

    def test_trim_drops_old_index_entries_and_a_batch_index_expires(
        self, store: JobStore, redis_client: aioredis.Redis, run: Run
    ) -> None:
        old, new = new_job_id_at(1000.0) + "aa", new_job_id_at(5000.0) + "bb"
        run(store.create_many([Job(id=old, owner="k"), Job(id=new, owner="k")]))
        assert run(store.trim(created_before=2000.0)) == 2  # all-jobs and the owner's index
        assert run(redis_client.zrange("test:jobs", 0, -1)) == [new.encode()]
        assert run(redis_client.zrange("test:jobs:owner:k", 0, -1)) == [new.encode()]
        batch = [Job(id=f"job_b{n}", batch_id="batch_9") for n in range(2)]
        run(store.create_many(batch))
        run(store.succeed("job_b0", transcript()))
        assert 0 < run(redis_client.pttl("test:jobs:batch:batch_9")) <= 100_000

    def test_batch_counts_are_kept_beside_the_jobs(
        self, store: JobStore, redis_client: aioredis.Redis, run: Run
    ) -> None:
        """Counted as the jobs move, so a job whose document is gone still counts; the
        counts expire with the batch's index."""
        jobs = [Job(id=f"job_b{n}", batch_id="batch_1", admitted_s=2.5 + n) for n in range(4)]
        run(store.create_many(jobs))
        run(store.start("job_b0"))
        run(store.succeed("job_b0", transcript()))
        run(store.start("job_b1"))
        run(redis_client.delete("test:job:job_b0", "test:job:job_b3"))  # not read
        expected = {JobStatus.SUCCEEDED: 1, JobStatus.RUNNING: 1, JobStatus.QUEUED: 2}
        assert run(store.batch_counts("batch_1")) == expected
        assert run(store.batch_backlog("batch_1")).queued_s == 4.5 + 5.5
        assert 0 < run(redis_client.pttl("test:jobs:batch:batch_1:counts")) <= 100_000

    def test_a_batch_from_before_the_counts_is_counted_from_its_jobs(
        self, store: JobStore, redis_client: aioredis.Redis, run: Run
    ) -> None:
        jobs = [Job(id=f"job_b{n}", batch_id="batch_1", admitted_s=2.0) for n in range(3)]
        run(store.create_many(jobs))
        run(redis_client.delete("test:jobs:batch:batch_1:counts"))  # as an older release left it
        run(store.fail("job_b2", JobError(status=415, code="x", message="y")))
        run(store.start("job_b1"))
        expected = {JobStatus.FAILED: 1, JobStatus.RUNNING: 1, JobStatus.QUEUED: 1}
        assert run(store.batch_counts("batch_1")) == expected
        backlog = run(store.batch_backlog("batch_1"))
        assert (backlog.queued_s, [job.id for job in backlog.running]) == (2.0, ["job_b1"])

    def test_finished_job_keeps_its_audio_until_swept(
        self, store: JobStore, redis_client: aioredis.Redis, run: Run
    ) -> None:
        run(store.create(Job(id="job_1", audio_path="/tmp/x")))
        run(store.succeed("job_1", transcript()))
        assert run(redis_client.pttl("test:job:job_1")) == -1
        run(store.forget_audio("job_1"))
        assert run(redis_client.pttl("test:job:job_1")) > 0

    def test_expired_documents_leave_the_indexes(
        self, store: JobStore, redis_client: aioredis.Redis, run: Run
    ) -> None:
        jobs = [Job(id=f"job_{n}", owner="key_a", batch_id="batch_1") for n in range(4)]
        run(store.create_many(jobs))
        run(store.succeed("job_2", transcript()))
        run(redis_client.delete("test:job:job_2", "test:job:job_3"))  # what expiry does
        assert [j.id for j in run(store.page(limit=2))] == ["job_1", "job_0"]
        assert run(redis_client.zscore("test:jobs", "job_2")) is None  # pruned while paging
        assert run(redis_client.zscore("test:jobs", "job_3")) is None
        assert [j.id for j in run(store.page(owner="key_a"))] == ["job_1", "job_0"]
        assert [j.id for j in run(store.unfinished())] == ["job_0", "job_1"]
        assert len(run(store.batch_jobs("batch_1"))) == 2
        assert run(redis_client.zcard("test:jobs:batch:batch_1")) == 2
        assert run(store.update("job_3", lambda j: j)) is None

    def test_concurrent_updates_are_not_lost(self, store: JobStore, run: Run) -> None:
        run(store.create(Job(id="job_1")))

        def bump(job: Job) -> Job:
            return job.model_copy(update={"attempts": job.attempts + 1})

        async def worker() -> None:
            for _ in range(25):
                await store.update("job_1", bump)

        async def main() -> None:
            await asyncio.gather(worker(), worker(), worker())

        run(main())
        stored = run(store.get("job_1"))
        assert stored is not None and stored.attempts == 75

    def test_page_by_status_and_owner(self, store: JobStore, run: Run) -> None:
        owners = ["key_a", "key_b", None, "key_a", "key_a"]
        run(store.create_many([Job(id=f"job_{n}", owner=o) for n, o in enumerate(owners)]))
        run(store.cancel("job_3"))
        queued = run(store.page(status=JobStatus.QUEUED, owner="key_a"))
        assert [j.id for j in queued] == ["job_4", "job_0"]
        cancelled = run(store.page(status=JobStatus.CANCELLED))
        assert [j.id for j in cancelled] == ["job_3"]
        assert [j.id for j in run(store.page(status=JobStatus.QUEUED, limit=2, after="job_4"))] == [
            "job_2",
            "job_1",
        ]

    def test_pages_match_sqlite(self, store: JobStore, database: Database, run: Run) -> None:
        reference = SqliteJobStore(database)
        owners = ["key_a", "key_b", None]
        jobs = [Job(id=f"job_{n:03d}", owner=owners[n % 3]) for n in range(30)]
        for both in (store, reference):  # the same data, except for the times
            run(both.create_many(jobs))
            for n in range(0, 30, 4):
                run(both.start(jobs[n].id))
            for n in range(0, 30, 5):
                run(both.cancel(jobs[n].id))
        for status in (None, *JobStatus):
            for owner in (None, *owners):
                for after in (None, "job_017", "job_000"):
                    pages = [
                        run(s.page(status=status, owner=owner, after=after, limit=4))
                        for s in (store, reference)
                    ]
                    got, want = ([(j.id, j.status) for j in page] for page in pages)
                    assert got == want, (status, owner, after)

    def test_prefixes_keep_deployments_apart(
        self, store: JobStore, redis_client: aioredis.Redis, run: Run
    ) -> None:
        other = RedisJobStore(redis_client, "other")
        run(store.create(Job(id="job_1")))
        assert run(other.get("job_1")) is None
        assert run(other.page()) == [] and run(other.unfinished()) == []
        keys = run(redis_client.keys("*"))
        assert all(isinstance(k, bytes) and k.startswith(b"test:") for k in keys)
