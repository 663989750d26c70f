"""Carries each batch through its life: validate → in_progress → finalizing → an end state.

Items become ordinary jobs at the lowest priority (``Priority.OFFLINE``), enqueued longest
first so that the worker's offline lane holds chunks of similar length. The runner wakes
when one of a batch's jobs finishes (``kick``) or when the next batch expires, never by
polling. Every step can be repeated after a crash: jobs have deterministic ids, items
and queue entries are inserted only once, and the output files are written from the
stored job results, one line per request, whenever the batch finalizes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from asrserve.audio.errors import AudioError
from asrserve.batch_api.models import Batch, BatchErrorLine, BatchItem, BatchStatus, RequestCounts
from asrserve.batch_api.models import item_job_id as job_id_for
from asrserve.batch_api.output import split_lines, write_lines
from asrserve.batch_api.store import BatchStore
from asrserve.batch_lines import InvalidInput, RequestLine, parse_input
from asrserve.blobs.references import drop_references
from asrserve.engine.catalog import Catalog
from asrserve.errors import AsrError, InvalidRequest, NotFound, QuotaExceeded
from asrserve.files.models import FilePurpose, StoredFile
from asrserve.jobs.models import Job, JobError, JobStatus, WebhookStatus
from asrserve.requests import check_chunking
from asrserve.service.fairness import round_robin
from asrserve.service.files import FileNotFound, Files
from asrserve.service.jobs import Service, new_job
from asrserve.vocabulary import Priority
from asrserve.waiting import wait_event

log = logging.getLogger(__name__)

# Jobs of a cancelled or expired batch cancelled in one step, before the runner turns to the
# other batches (a 50,000-line batch once held it 3 min 51 s, cancelled one job at a time).
CANCEL_STEP = 2000


class BatchRunner:
    def __init__(
        self,
        service: Service,
        batches: BatchStore,
        files: Files,
        catalog: Catalog,
        on_end: Callable[[Batch], None] = lambda batch: None,
    ) -> None:
        self._service = service
        self._on_end = on_end
        self._settings = service.settings
        self._batches = batches
        self._files = files
        self._catalog = catalog
        self._kick = asyncio.Event()

    def kick(self) -> None:
        """Something changed (a batch was created or cancelled, an item finished)."""
        self._kick.set()

    async def run(self) -> None:
        while True:
            self._kick.clear()
            next_expiry = float("inf")
            for batch in round_robin(await self._batches.active(), lambda one: one.owner):
                current = await self._advance_or_fail(batch)
                if current.status is BatchStatus.IN_PROGRESS:
                    next_expiry = min(next_expiry, current.expires_at)
            timeout = max(next_expiry - time.time(), 0.0) if next_expiry < float("inf") else None
            await wait_event(self._kick, timeout)

    async def _advance_or_fail(self, batch: Batch) -> Batch:
        """The batch moved on; a step that fails unexpectedly fails this batch (its error
        recorded, as GET shows it), never the runner: other owners' batches go on."""
        try:
            return await self._advance(batch)
        except Exception as exc:
            log.exception("batch %s failed unexpectedly in %s", batch.id, batch.status.value)
            message = f"the batch could not be processed: {type(exc).__name__}"
            error = BatchErrorLine(code="internal_error", message=message)
            try:
                failed = await self._set(batch.id, BatchStatus.FAILED, "failed_at", errors=[error])
            except Exception:
                log.exception("batch %s could not be marked failed", batch.id)
                return batch
            if failed is not None:
                self._on_end(failed)
            return failed or batch

    async def _advance(self, batch: Batch) -> Batch:
        if batch.status is BatchStatus.VALIDATING:
            batch = await self._validate(batch) or batch
            if batch.status.finished:  # refused: its waiters read it now, not at their timeout
                self._on_end(batch)
            self.kick()  # look at it again in its new state
            return batch
        if batch.status is BatchStatus.IN_PROGRESS and time.time() >= batch.expires_at:
            batch = await self._set(batch.id, BatchStatus.FINALIZING, "expired_at") or batch
        if batch.status in (BatchStatus.CANCELLING, BatchStatus.FINALIZING):
            if await self._cancel_jobs(batch.id):
                self.kick()  # more to cancel: after the other batches have had a turn
                return batch
            return await self._finalize(batch)
        counts = await self._counts(batch)
        if counts.completed + counts.failed >= counts.total:
            return await self._finalize(batch)
        if counts != batch.request_counts:
            update = {"request_counts": counts}
            batch = (
                await self._batches.update(batch.id, lambda b: b.model_copy(update=update)) or batch
            )
        return batch

    # --- validating -------------------------------------------------------------------
    async def _validate(self, batch: Batch) -> Batch | None:
        try:
            requests = await self._read_input(batch)
        except InvalidInput as exc:
            log.info("batch %s failed validation: %d error(s)", batch.id, len(exc.errors))
            return await self._set(batch.id, BatchStatus.FAILED, "failed_at", errors=exc.errors)
        records = {}
        for file_id in {request.file_id for request in requests}:
            record = await self._files.store.get(file_id)
            usable = record and record.purpose is FilePurpose.AUDIO and record.owner == batch.owner
            records[file_id] = record if usable else None
        durations = {
            file_id: await self._probe(self._files.content_path(file_id), batch.owner or "")
            for file_id, record in records.items()
            if record is not None
        }
        items, planned = await asyncio.to_thread(self._plan, batch, requests, records, durations)
        folder = self._service.settings.audio_dir
        jobs = [await self._service.with_references_kept(job, folder) for job in planned]
        seconds = sum(job.admitted_s for job in jobs)
        try:
            await self._service.charge(batch.owner, seconds)
        except QuotaExceeded as exc:
            for job in jobs:
                await drop_references(self._service.blobs, job.known_speakers)
            error = BatchErrorLine(code=exc.code or "quota_exceeded", message=exc.message)
            return await self._set(batch.id, BatchStatus.FAILED, "failed_at", errors=[error])
        await self._batches.add_items(items)
        await self._service.enqueue_offline(jobs, batch.owner)
        failed = sum(item.error is not None for item in items)
        log.info(
            "batch %s in progress: %d request(s), %d rejected, %.1f audio s",
            batch.id,
            len(items),
            failed,
            seconds,
        )
        return await self._set(
            batch.id,
            BatchStatus.IN_PROGRESS,
            "in_progress_at",
            request_counts=RequestCounts(total=len(items), failed=failed),
            rejected=failed,
            audio_seconds=round(seconds, 3),
        )

    async def _read_input(self, batch: Batch) -> list[RequestLine]:
        """The requests, parsed line by line as the file is read (never read whole), each
        within the languages its owner's key allows."""
        record = await self._files.store.get(batch.input_file_id)
        path = self._files.content_path(batch.input_file_id)
        message = f"the input file '{batch.input_file_id}' no longer exists"
        gone = InvalidInput([BatchErrorLine(code="file_not_found", message=message)])
        if record is None:
            raise gone
        settings = self._settings
        languages = await self._service.languages_of(batch.owner)

        def parse() -> list[RequestLine]:
            with path.open("rb") as source:
                return parse_input(
                    source,
                    self._catalog,
                    settings.batch_api_max_requests,
                    settings.batch_api_max_line_bytes,
                    batch.endpoint,
                    languages,
                )

        try:
            return await asyncio.to_thread(parse)
        except FileNotFoundError:
            raise gone from None

    def _plan(
        self,
        batch: Batch,
        requests: Sequence[RequestLine],
        records: Mapping[str, StoredFile | None],
        durations: Mapping[str, float | AsrError | None],
    ) -> tuple[list[BatchItem], list[Job]]:
        """Items and jobs for the requests, each audio file probed once (``durations``)."""
        items: list[BatchItem] = []
        jobs: list[Job] = []
        for request in requests:
            record = records[request.file_id]
            item = BatchItem(
                batch_id=batch.id,
                line=request.line,
                custom_id=request.custom_id,
                response_format=request.request.response_format,
                words=request.request.words,
                cues=request.request.cues,
            )
            if record is None:
                message = f"no audio file '{request.file_id}' (upload it with purpose=audio)"
                error = JobError.of(FileNotFound(message))
                items.append(item.model_copy(update={"error": error}))
                continue
            path = self._files.content_path(record.id)
            duration = durations[record.id]
            if not isinstance(duration, AsrError):
                try:
                    check_chunking(request.request, duration)
                except InvalidRequest as exc:
                    duration = exc
            if isinstance(duration, AsrError):
                items.append(item.model_copy(update={"error": JobError.of(duration)}))
                continue
            job = new_job(
                job_id_for(batch.id, request.line),
                request.request,
                Priority.OFFLINE,
                filename=record.filename,
                audio_bytes=record.bytes,
                duration=duration,
                owner=batch.owner,
                tenant=batch.owner is not None,  # a key's batch: as a tenant's
                audio_path=str(path),
                batch_id=batch.id,
            )
            jobs.append(job)
            items.append(item.model_copy(update={"job_id": job.id}))
        return items, jobs

    async def _probe(self, path: Path, tenant: str) -> float | AsrError | None:
        try:
            return await self._service.probe(path, tenant)
        except AudioError as exc:
            return exc
        except OSError:
            return NotFound("the audio file is no longer stored", code="file_not_found")

    # --- ending -------------------------------------------------------------------------
    async def _cancel_jobs(self, batch_id: str) -> bool:
        """Cancel the next :data:`CANCEL_STEP` unfinished jobs of the batch in one store
        call; whether there may be more."""
        return await self._service.cancel_batch_jobs(batch_id, CANCEL_STEP)

    async def _counts(self, batch: Batch) -> RequestCounts:
        by_status = await self._service.batch_counts(batch.id)
        return RequestCounts(
            total=batch.request_counts.total,
            completed=by_status.get(JobStatus.SUCCEEDED, 0),
            failed=batch.rejected + by_status.get(JobStatus.FAILED, 0),
        )

    async def _finalize(self, batch: Batch) -> Batch:
        """Write the output and error files from the stored results; end the batch."""
        if batch.status is not BatchStatus.FINALIZING:
            batch = await self._set(batch.id, BatchStatus.FINALIZING, "finalizing_at") or batch
            if batch.status is not BatchStatus.FINALIZING:
                return batch
        items = await self._batches.items(batch.id)
        jobs = {job.id: job for job in await self._service.batch_jobs(batch.id)}
        if batch.expired_at is not None:
            end, stamp, unfinished = BatchStatus.EXPIRED, "expired_at", "batch_expired"
        elif batch.cancelling_at is not None:
            end, stamp, unfinished = BatchStatus.CANCELLED, "cancelled_at", "batch_cancelled"
        else:
            end, stamp, unfinished = BatchStatus.COMPLETED, "completed_at", "batch_incomplete"
        output, errors = split_lines(items, jobs, unfinished)
        output_id = await self._write(batch, "output", output)
        error_id = await self._write(batch, "errors", errors)
        counts = await self._counts(batch)
        webhook = WebhookStatus.PENDING if batch.callback_url else None
        done = await self._set(
            batch.id,
            end,
            stamp,
            output_file_id=output_id,
            error_file_id=error_id,
            request_counts=counts,
            webhook_status=webhook,
        )
        log.info(
            "batch %s %s: %d completed, %d failed of %d",
            batch.id,
            end.value,
            counts.completed,
            counts.failed,
            counts.total,
        )
        if done is not None:
            self._on_end(done)
        return done or batch

    async def _write(self, batch: Batch, kind: str, lines: Sequence[str]) -> str | None:
        if not lines:
            return None
        file_id = f"file-{batch.id.removeprefix('batch_')}-{kind}"
        path = self._files.content_path(file_id)
        size = await asyncio.to_thread(write_lines, path, lines)
        filename = f"{batch.id}_{kind}.jsonl"
        record = StoredFile(
            id=file_id,
            bytes=size,
            filename=filename,
            purpose=FilePurpose.BATCH_OUTPUT,
            owner=batch.owner,
        )
        await self._files.store.put(record)
        return file_id

    async def _set(
        self, batch_id: str, status: BatchStatus, stamp: str, **changes: object
    ) -> Batch | None:
        """Move a batch that has not finished to ``status``, stamping ``stamp`` with now."""

        def mutate(batch: Batch) -> Batch | None:
            if batch.status.finished:
                return None
            if batch.status is BatchStatus.CANCELLING and status is BatchStatus.IN_PROGRESS:
                return None  # cancelled while validating: stays cancelling
            update = {**changes, "status": status}
            if getattr(batch, stamp) is None:
                update[stamp] = int(time.time())
            return batch.model_copy(update=update)

        return await self._batches.update(batch_id, mutate)
