"""The Batch API runner serves owners fairly (#25 item 9), on real SQLite stores and a real
probe: a large batch being cancelled is cancelled in bulk steps, and another owner's batch
is validated between two of them, not after the last. And a batch refused in validation is
announced as ended, as a completed one is."""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from asrserve.backends.backend import open_backend
from asrserve.batch_api.models import Batch, BatchStatus
from asrserve.batch_api.store import BatchStore
from asrserve.bench.corpus import write_wav
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.files.models import FilePurpose, StoredFile
from asrserve.files.store import FileStore
from asrserve.jobs.models import JobStatus
from asrserve.service.batch_runner import CANCEL_STEP, BatchRunner
from asrserve.service.files import Files
from asrserve.service.jobs import Service
from asrserve.settings import Settings
from asrserve.vocabulary import Priority

CATALOG = Catalog.of([ModelInfo(id="tiny.en", multilingual=False, default_beam_size=5)])
ENDPOINT = "/v1/audio/transcriptions"
LINES = {"big": 3 * CANCEL_STEP, "small": 1}


class Recorded:
    """Each status a batch was set to, in order, and an event for each once it is set."""

    def __init__(self, batches: BatchStore) -> None:
        self.order: list[tuple[str, BatchStatus]] = []
        self.reached: defaultdict[tuple[str, BatchStatus], asyncio.Event] = defaultdict(
            asyncio.Event
        )
        update = batches.update

        async def recorded(batch_id: str, mutate):  # type: ignore[no-untyped-def]
            new = await update(batch_id, mutate)
            if new is not None:
                self.order.append((batch_id, new.status))
                self.reached[(batch_id, new.status)].set()
            return new

        batches.update = recorded  # type: ignore[method-assign]


def requests(lines: int, audio_id: str) -> bytes:
    body = {"file": audio_id, "model": "tiny.en"}
    entries = [
        {"custom_id": f"r{n}", "method": "POST", "url": ENDPOINT, "body": body}
        for n in range(lines)
    ]
    return "\n".join(json.dumps(entry) for entry in entries).encode()


def stored_files(files_dir: Path) -> list[StoredFile]:
    """Each owner's audio file and request file, written to ``files_dir``."""
    files_dir.mkdir(parents=True)
    wav = files_dir / "one.wav"
    write_wav(wav, (np.sin(np.arange(16000) / 5) * 8000).astype(np.int16), rate=16000)
    records = []
    for owner, lines in LINES.items():
        audio, batch = f"file-audio-{owner}", f"file-in-{owner}"
        for file_id, data, purpose in (
            (audio, wav.read_bytes(), FilePurpose.AUDIO),
            (batch, requests(lines, audio), FilePurpose.BATCH),
        ):
            (files_dir / file_id).write_bytes(data)
            records.append(
                StoredFile(
                    id=file_id, bytes=len(data), filename=file_id, purpose=purpose, owner=owner
                )
            )
    return records


def files_of(settings: Settings, store: FileStore) -> Files:
    """The Files service as the app wires it from ``settings``."""
    files_dir, most = settings.files_dir, settings.max_job_upload_bytes
    return Files(settings, store, files_dir=files_dir, max_job_upload_bytes=most)


def test_a_batch_being_cancelled_leaves_turns_to_another_owners(tmp_path: Path) -> None:
    """6000 jobs of one owner's batch are cancelled 2000 at a time; the other owner's
    1-line batch, created once the cancel began, is validated before the last step (it
    waited for all 6000, one store call each)."""
    settings = Settings(data_dir=tmp_path, record_traffic=False)
    records = stored_files(settings.files_dir)

    async def main() -> tuple[Recorded, dict[str, str], dict[JobStatus, int], int]:
        backend = open_backend(settings)
        service = Service(settings, backend)
        recorded = Recorded(backend.batches)
        ids = {"big": "batch_1", "small": "batch_2"}  # the order the runner reads them in
        for record in records:
            await backend.files.put(record)
        runner = BatchRunner(service, backend.batches, files_of(settings, backend.files), CATALOG)
        now = int(time.time())

        async def create(owner: str) -> None:
            batch = Batch(id=ids[owner], input_file_id=f"file-in-{owner}", expires_at=now + 3600)
            await backend.batches.create(batch.model_copy(update={"owner": owner}))

        async def run_until(reached: tuple[str, BatchStatus]) -> None:
            running = asyncio.create_task(runner.run())
            try:
                async with asyncio.timeout(120):
                    await recorded.reached[reached].wait()
            finally:
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)

        await create("big")
        await run_until((ids["big"], BatchStatus.IN_PROGRESS))
        # the runner stopped: both batches are there when it starts again, the big one first
        cancelling = {"status": BatchStatus.CANCELLING, "cancelling_at": now}
        await backend.batches.update(ids["big"], lambda b: b.model_copy(update=cancelling))
        await create("small")
        await run_until((ids["big"], BatchStatus.CANCELLED))
        counts = await service.store.batch_counts(ids["big"])
        queued = (await backend.queue.depth())[Priority.OFFLINE]
        await service.probes.close()
        await backend.aclose()
        return recorded, ids, counts, queued

    recorded, ids, counts, queued = asyncio.run(main())
    assert counts == {JobStatus.CANCELLED: LINES["big"]}
    # the cancelled jobs' queue entries went with them (issue 42: a worker used to claim,
    # read and acknowledge each in turn, and the small batch's job waited behind them)
    assert queued == LINES["small"]
    small_validated = recorded.order.index((ids["small"], BatchStatus.IN_PROGRESS))
    big_cancelled = recorded.order.index((ids["big"], BatchStatus.CANCELLED))
    assert small_validated < big_cancelled, recorded.order


def test_a_batch_refused_in_validation_is_announced_as_ended(tmp_path: Path) -> None:
    """A batch whose input fails validation reaches ``on_end`` (what wakes its long polls
    and its webhook), as a batch that completes does: its waiters used to read it only at
    their timeout."""
    settings = Settings(data_dir=tmp_path, record_traffic=False)
    settings.files_dir.mkdir(parents=True)
    data = b"{not json"
    (settings.files_dir / "file-in-bad").write_bytes(data)
    record = StoredFile(
        id="file-in-bad", bytes=len(data), filename="in", purpose=FilePurpose.BATCH, owner=None
    )

    async def main() -> list[Batch]:
        backend = open_backend(settings)
        service = Service(settings, backend)
        await backend.files.put(record)
        ended: list[Batch] = []
        announced = asyncio.Event()

        def on_end(batch: Batch) -> None:
            ended.append(batch)
            announced.set()

        files = files_of(settings, backend.files)
        runner = BatchRunner(service, backend.batches, files, CATALOG, on_end)
        batch = Batch(id="batch_bad", input_file_id="file-in-bad", expires_at=int(time.time()) + 60)
        await backend.batches.create(batch)
        running = asyncio.create_task(runner.run())
        try:
            async with asyncio.timeout(60):  # a bound for a broken runner, not a timing claim
                await announced.wait()
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            await service.probes.close()
            await backend.aclose()
        return ended

    [ended] = asyncio.run(main())
    assert (ended.id, ended.status) == ("batch_bad", BatchStatus.FAILED)
    assert [error.code for error in ended.errors or []] == ["invalid_json"]
