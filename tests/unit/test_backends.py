"""One contract per protocol, run against every backend (SQLite today)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from asrserve.jobs.models import Job, JobError, JobStatus, Priority, WebhookStatus, new_job_id
from asrserve.jobs.sqlite import SCHEMA, SqliteJobStore
from asrserve.jobs.store import JobStore
from asrserve.queue.base import Queue
from asrserve.queue.sqlite import SqliteQueue
from asrserve.sqlite import Database
from asrserve.transcript import Segment, Transcript

T = TypeVar("T")


def sync(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


def transcript() -> Transcript:
    seg = Segment(
        id=0,
        seek=0,
        start=0.0,
        end=1.0,
        text=" hi",
        tokens=[1],
        temperature=0.0,
        avg_logprob=-0.1,
        compression_ratio=1.0,
        no_speech_prob=0.0,
    )
    return Transcript(language="en", duration=1.0, segments=[seg])


class JobStoreContract:
    @pytest.fixture
    def store(self) -> JobStore:
        raise NotImplementedError

    def test_create_get_roundtrip(self, store: JobStore) -> None:
        job = Job(id=new_job_id(), filename="a.wav", callback_url="http://example.test/x")
        sync(store.create(job))
        assert sync(store.get(job.id)) == job
        assert sync(store.get("job_missing")) is None

    def test_result_is_stored_exactly_once(self, store: JobStore) -> None:
        job = Job(id=new_job_id())
        sync(store.create(job))
        started = sync(store.start(job.id))
        assert started is not None and started.status is JobStatus.RUNNING
        assert started.attempts == 1
        done = sync(store.succeed(job.id, transcript()))
        assert done is not None and done.result is not None and done.result.text == "hi"
        assert sync(store.succeed(job.id, transcript())) is None  # second completion: no-op
        assert sync(store.fail(job.id, JobError(status=500, code="x", message="y"))) is None
        assert sync(store.start(job.id)) is None
        stored = sync(store.get(job.id))
        assert stored is not None and stored.status is JobStatus.SUCCEEDED

    def test_cancel_only_unfinished(self, store: JobStore) -> None:
        job = Job(id=new_job_id())
        sync(store.create(job))
        cancelled = sync(store.cancel(job.id))
        assert cancelled is not None and cancelled.status is JobStatus.CANCELLED
        assert sync(store.cancel(job.id)) is None
        assert sync(store.succeed(job.id, transcript())) is None

    def test_page_newest_first_with_cursor_and_filter(self, store: JobStore) -> None:
        ids = []
        for n in range(5):
            job = Job(id=f"job_{n:04d}")
            sync(store.create(job))
            ids.append(job.id)
        sync(store.cancel(ids[1]))
        first = sync(store.page(limit=2))
        assert [j.id for j in first] == [ids[4], ids[3]]
        second = sync(store.page(limit=2, after=first[-1].id))
        assert [j.id for j in second] == [ids[2], ids[1]]
        assert [j.id for j in sync(store.page(status=JobStatus.CANCELLED))] == [ids[1]]
        assert {j.id for j in sync(store.unfinished())} == set(ids) - {ids[1]}

    def test_webhooks_pending_and_recorded(self, store: JobStore) -> None:
        job = Job(id=new_job_id(), callback_url="http://example.test/hook")
        sync(store.create(job))
        sync(store.succeed(job.id, transcript()))
        assert [j.id for j in sync(store.webhooks_pending())] == [job.id]
        sync(store.record_webhook(job.id, WebhookStatus.DELIVERED, None))
        assert sync(store.webhooks_pending()) == []
        stored = sync(store.get(job.id))
        assert stored is not None and stored.webhook_attempts == 1

    def test_audio_expiry(self, store: JobStore) -> None:
        job = Job(id=new_job_id(), audio_path="/tmp/x")
        sync(store.create(job))
        assert sync(store.audio_expired(finished_before=1e18)) == []
        sync(store.succeed(job.id, transcript()))
        assert [j.id for j in sync(store.audio_expired(finished_before=1e18))] == [job.id]
        sync(store.forget_audio(job.id))
        assert sync(store.audio_expired(finished_before=1e18)) == []

    def test_batch_jobs_and_idempotent_create_many(self, store: JobStore) -> None:
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

        sync(main())


class QueueContract:
    def test_caps_per_priority(self, queue_factory: Callable[[], Queue]) -> None:
        async def main() -> None:
            queue = queue_factory()
            await queue.put_many([f"b{i}" for i in range(5)], Priority.BATCH)
            await queue.put("i", Priority.INTERACTIVE)
            await queue.put("a", Priority.ASYNC)
            online = await queue.get({Priority.INTERACTIVE: 4, Priority.ASYNC: 4}, 0)
            assert [d.job_id for d in online] == ["i", "a"]
            offline = await queue.get({Priority.BATCH: 2}, 0)
            assert [d.job_id for d in offline] == ["b0", "b1"]  # put_many keeps the order
            assert await queue.get({Priority.INTERACTIVE: 4}, 0) == []
            assert [d.job_id for d in await queue.get(10, 0)] == ["b2", "b3", "b4"]

        asyncio.run(main())

    def test_concurrent_consumers_both_wake(self, queue_factory: Callable[[], Queue]) -> None:
        async def main() -> set[str]:
            queue = queue_factory()
            online = asyncio.create_task(queue.get({Priority.INTERACTIVE: 1}, 5.0))
            offline = asyncio.create_task(queue.get({Priority.BATCH: 1}, 5.0))
            await asyncio.sleep(0.01)
            await queue.put("b", Priority.BATCH)
            await queue.put("i", Priority.INTERACTIVE)
            done = await asyncio.wait_for(asyncio.gather(online, offline), 2.0)
            return {d.job_id for batch in done for d in batch}

        assert asyncio.run(main()) == {"i", "b"}

    def test_priority_then_fifo(self, queue_factory: Callable[[], Queue]) -> None:
        async def main() -> list[str]:
            queue = queue_factory()
            await queue.put("a", Priority.BATCH)
            await queue.put("b", Priority.ASYNC)
            await queue.put("c", Priority.INTERACTIVE)
            await queue.put("d", Priority.ASYNC)
            await queue.put("b", Priority.ASYNC)  # idempotent
            return [d.job_id for d in await queue.get(10, 0)]

        assert asyncio.run(main()) == ["c", "b", "d", "a"]

    def test_claimed_entries_are_not_redelivered_until_recovered(
        self, queue_factory: Callable[[], Queue]
    ) -> None:
        async def main() -> None:
            queue = queue_factory()
            await queue.put("a", Priority.ASYNC)
            (first,) = await queue.get(5, 0)
            assert first.deliveries == 1
            assert await queue.get(5, 0) == []
            assert await queue.recover() == 1  # the consumer died
            (again,) = await queue.get(5, 0)
            assert again.deliveries == 2
            await queue.ack(again)
            assert await queue.recover() == 0
            assert await queue.get(5, 0) == []

        asyncio.run(main())

    def test_get_blocks_until_put(self, queue_factory: Callable[[], Queue]) -> None:
        async def main() -> list[str]:
            queue = queue_factory()
            waiter = asyncio.create_task(queue.get(5, 5.0))
            await asyncio.sleep(0.01)
            assert not waiter.done()
            await queue.put("late", Priority.ASYNC)
            return [d.job_id for d in await asyncio.wait_for(waiter, 2.0)]

        assert asyncio.run(main()) == ["late"]

    def test_release_and_depth(self, queue_factory: Callable[[], Queue]) -> None:
        async def main() -> None:
            queue = queue_factory()
            await queue.put("a", Priority.ASYNC)
            await queue.put("b", Priority.INTERACTIVE)
            assert (await queue.depth())[Priority.ASYNC] == 1
            (b,) = await queue.get(1, 0)
            await queue.release(b)
            (again,) = await queue.get(1, 0)
            assert again.job_id == "b" and again.deliveries == 1

        asyncio.run(main())


class TestSqliteJobStore(JobStoreContract):
    @pytest.fixture
    def store(self, database: Database) -> JobStore:
        return SqliteJobStore(database)

    def test_survives_reopen(self, tmp_path: Path) -> None:
        db = Database(tmp_path / "x.db")
        job = Job(id=new_job_id())
        sync(SqliteJobStore(db).create(job))
        db.close()
        db = Database(tmp_path / "x.db")
        assert sync(SqliteJobStore(db).get(job.id)) == job
        db.close()

    def test_adds_columns_to_a_database_from_an_earlier_version(self, tmp_path: Path) -> None:
        db = Database(tmp_path / "old.db")
        old_schema = SCHEMA.replace(
            ",\n    batch_id TEXT,\n    owns_audio INTEGER NOT NULL DEFAULT 1", ""
        )
        assert "owns_audio" not in old_schema
        db.migrate(old_schema)
        db.run_sync(lambda c: c.execute(OLD_ROW))
        store = SqliteJobStore(db)
        old = sync(store.get("job_old"))
        assert old is not None and old.owns_audio and old.batch_id is None
        job = Job(id=new_job_id(), batch_id="batch_1", owns_audio=False)
        sync(store.create(job))
        assert sync(store.get(job.id)) == job
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
