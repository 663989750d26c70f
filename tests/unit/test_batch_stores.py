"""Contracts for the file and batch stores, run against every backend (SQLite and Redis)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis.asyncio as aioredis

from asrserve.batch_api.models import Batch, BatchItem, BatchStatus
from asrserve.batch_api.redis import RedisBatchStore
from asrserve.batch_api.sqlite import SqliteBatchStore
from asrserve.batch_api.store import BatchStore
from asrserve.drivers.sqlite import Database
from asrserve.files.models import FilePurpose, StoredFile
from asrserve.files.redis import RedisFileStore
from asrserve.files.sqlite import SqliteFileStore
from asrserve.files.store import FileStore
from asrserve.jobs.models import JobError, WebhookStatus
from tests.support.loop import Run


class FileStoreContract:
    def test_put_get_page_delete(self, files: FileStore, run: Run) -> None:
        records = [
            StoredFile(id=f"file-{i}", bytes=i, filename=f"f{i}", purpose=purpose)
            for i, purpose in enumerate([FilePurpose.AUDIO, FilePurpose.BATCH, FilePurpose.AUDIO])
        ]
        for record in records:
            run(files.put(record))
        assert run(files.get("file-1")) == records[1]
        assert run(files.get("file-9")) is None
        assert [f.id for f in run(files.page(limit=2))] == ["file-2", "file-1"]
        assert [f.id for f in run(files.page(after="file-1"))] == ["file-0"]
        audio = run(files.page(purpose=FilePurpose.AUDIO))
        assert [f.id for f in audio] == ["file-2", "file-0"]
        run(files.put(records[0].model_copy(update={"bytes": 99})))  # replace: idempotent writes
        assert run(files.get("file-0")).bytes == 99  # type: ignore[union-attr]
        assert run(files.delete("file-0")) is True
        assert run(files.delete("file-0")) is False


class BatchStoreContract:
    def test_lifecycle_queries(self, batches: BatchStore, run: Run) -> None:
        first = Batch(id="batch_1", input_file_id="file-a", expires_at=10)
        second = Batch(id="batch_2", input_file_id="file-b", expires_at=10)
        run(batches.create(first))
        run(batches.create(second))
        assert run(batches.get("batch_1")) == first
        assert [b.id for b in run(batches.page(limit=1))] == ["batch_2"]
        assert [b.id for b in run(batches.page(after="batch_2"))] == ["batch_1"]

        def complete(batch: Batch) -> Batch:
            update = {"status": BatchStatus.COMPLETED, "webhook_status": WebhookStatus.PENDING}
            return batch.model_copy(update=update)

        done = run(batches.update("batch_1", complete))
        assert done is not None and done.status is BatchStatus.COMPLETED
        assert run(batches.update("batch_2", lambda b: None)) is None
        assert run(batches.update("batch_9", complete)) is None
        assert [b.id for b in run(batches.active())] == ["batch_2"]
        assert [b.id for b in run(batches.webhooks_pending())] == ["batch_1"]

    def test_items_in_line_order_and_idempotent(self, batches: BatchStore, run: Run) -> None:
        error = JobError(status=404, code="file_not_found", message="gone")
        items = [
            BatchItem(batch_id="batch_1", line=3, custom_id="c", job_id="job_3"),
            BatchItem(batch_id="batch_1", line=1, custom_id="a", error=error),
            BatchItem(batch_id="batch_2", line=1, custom_id="z", job_id="job_z"),
        ]
        run(batches.add_items(items))
        run(batches.add_items(items[:1]))
        assert run(batches.items("batch_1")) == [items[1], items[0]]


class TestSqliteFileStore(FileStoreContract):
    @pytest.fixture
    def files(self, database: Database) -> FileStore:
        return SqliteFileStore(database)


class TestSqliteBatchStore(BatchStoreContract):
    @pytest.fixture
    def batches(self, database: Database) -> BatchStore:
        return SqliteBatchStore(database)


class TestRedisFileStore(FileStoreContract):
    @pytest.fixture
    def files(self, redis_client: aioredis.Redis) -> FileStore:
        return RedisFileStore(redis_client, "test")

    def test_owner_roundtrips_and_filters(self, files: FileStore, run: Run) -> None:
        mine = StoredFile(id="file-1", bytes=1, filename="a", purpose=FilePurpose.AUDIO, owner="k")
        theirs = mine.model_copy(update={"id": "file-2", "owner": "j"})
        run(files.put(mine))
        run(files.put(theirs))
        assert run(files.get("file-1")) == mine
        assert run(files.page(owner="k")) == [mine]
        assert run(files.page(owner="k", purpose=FilePurpose.BATCH)) == []
        moved = mine.model_copy(update={"owner": "j", "purpose": FilePurpose.BATCH})
        run(files.put(moved))  # a replaced record leaves its old indexes
        assert run(files.page(owner="k")) == []
        assert run(files.page(purpose=FilePurpose.AUDIO)) == [theirs]
        assert run(files.page(owner="j")) == [theirs, moved]


class TestRedisBatchStore(BatchStoreContract):
    @pytest.fixture
    def batches(self, redis_client: aioredis.Redis) -> BatchStore:
        return RedisBatchStore(redis_client, "test", retention_s=100.0)

    def test_final_batch_expires_with_its_items(
        self, batches: BatchStore, redis_client: aioredis.Redis, run: Run
    ) -> None:
        run(batches.create(Batch(id="batch_1", input_file_id="f", expires_at=10, owner="k")))
        run(batches.add_items([BatchItem(batch_id="batch_1", line=1, custom_id="a")]))
        assert run(redis_client.pttl("test:batch:batch_1")) == -1

        def finish(webhook: WebhookStatus | None) -> Callable[[Batch], Batch]:
            update = {"status": BatchStatus.COMPLETED, "webhook_status": webhook}
            return lambda batch: batch.model_copy(update=update)

        run(batches.update("batch_1", finish(WebhookStatus.PENDING)))
        assert run(redis_client.pttl("test:batch:batch_1")) == -1  # webhook still to send
        run(batches.update("batch_1", finish(WebhookStatus.DELIVERED)))
        assert 0 < run(redis_client.pttl("test:batch:batch_1")) <= 100_000
        assert run(redis_client.pttl("test:batch:batch_1:items")) > 0
        with pytest.raises(ValueError):
            run(batches.create(Batch(id="batch_1", input_file_id="f", expires_at=10)))

    def test_expired_batch_leaves_the_indexes(
        self, batches: BatchStore, redis_client: aioredis.Redis, run: Run
    ) -> None:
        for n in range(3):
            run(batches.create(Batch(id=f"batch_{n}", input_file_id="f", expires_at=1, owner="k")))
        run(redis_client.delete("test:batch:batch_1"))  # what expiry does
        assert [b.id for b in run(batches.page(owner="k"))] == ["batch_2", "batch_0"]
        assert [b.id for b in run(batches.active())] == ["batch_0", "batch_2"]
        assert run(redis_client.zscore("test:batches:active", "batch_1")) is None
        assert run(batches.update("batch_1", lambda b: b)) is None
