"""Contracts for the file and batch stores, run against every backend (SQLite today)."""

from __future__ import annotations

import pytest

from asrserve.batches.models import Batch, BatchItem, BatchStatus
from asrserve.batches.sqlite import SqliteBatchStore
from asrserve.batches.store import BatchStore
from asrserve.files.models import FilePurpose, StoredFile
from asrserve.files.sqlite import SqliteFileStore
from asrserve.files.store import FileStore
from asrserve.jobs.models import JobError, WebhookStatus
from asrserve.sqlite import Database
from tests.unit.test_backends import sync


class FileStoreContract:
    def test_put_get_page_delete(self, files: FileStore) -> None:
        records = [
            StoredFile(id=f"file-{i}", bytes=i, filename=f"f{i}", purpose=purpose)
            for i, purpose in enumerate([FilePurpose.AUDIO, FilePurpose.BATCH, FilePurpose.AUDIO])
        ]
        for record in records:
            sync(files.put(record))
        assert sync(files.get("file-1")) == records[1]
        assert sync(files.get("file-9")) is None
        assert [f.id for f in sync(files.page(limit=2))] == ["file-2", "file-1"]
        assert [f.id for f in sync(files.page(after="file-1"))] == ["file-0"]
        audio = sync(files.page(purpose=FilePurpose.AUDIO))
        assert [f.id for f in audio] == ["file-2", "file-0"]
        sync(files.put(records[0].model_copy(update={"bytes": 99})))  # replace: idempotent writes
        assert sync(files.get("file-0")).bytes == 99  # type: ignore[union-attr]
        assert sync(files.delete("file-0")) is True
        assert sync(files.delete("file-0")) is False


class BatchStoreContract:
    def test_lifecycle_queries(self, batches: BatchStore) -> None:
        first = Batch(id="batch_1", input_file_id="file-a", expires_at=10)
        second = Batch(id="batch_2", input_file_id="file-b", expires_at=10)
        sync(batches.create(first))
        sync(batches.create(second))
        assert sync(batches.get("batch_1")) == first
        assert [b.id for b in sync(batches.page(limit=1))] == ["batch_2"]
        assert [b.id for b in sync(batches.page(after="batch_2"))] == ["batch_1"]

        def complete(batch: Batch) -> Batch:
            update = {"status": BatchStatus.COMPLETED, "webhook_status": WebhookStatus.PENDING}
            return batch.model_copy(update=update)

        done = sync(batches.update("batch_1", complete))
        assert done is not None and done.status is BatchStatus.COMPLETED
        assert sync(batches.update("batch_2", lambda b: None)) is None
        assert sync(batches.update("batch_9", complete)) is None
        assert [b.id for b in sync(batches.active())] == ["batch_2"]
        assert [b.id for b in sync(batches.webhooks_pending())] == ["batch_1"]

    def test_items_in_line_order_and_idempotent(self, batches: BatchStore) -> None:
        error = JobError(status=404, code="file_not_found", message="gone")
        items = [
            BatchItem(batch_id="batch_1", line=3, custom_id="c", job_id="job_3"),
            BatchItem(batch_id="batch_1", line=1, custom_id="a", error=error),
            BatchItem(batch_id="batch_2", line=1, custom_id="z", job_id="job_z"),
        ]
        sync(batches.add_items(items))
        sync(batches.add_items(items[:1]))
        assert sync(batches.items("batch_1")) == [items[1], items[0]]


class TestSqliteFileStore(FileStoreContract):
    @pytest.fixture
    def files(self, database: Database) -> FileStore:
        return SqliteFileStore(database)


class TestSqliteBatchStore(BatchStoreContract):
    @pytest.fixture
    def batches(self, database: Database) -> BatchStore:
        return SqliteBatchStore(database)
