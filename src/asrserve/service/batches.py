"""The Batch API's use cases: create a batch from a request file, read, wait on and cancel
batches. Running them is :mod:`asrserve.service.batch_runner`'s duty (the leader's).

Each key sees only its own batches: any other answers :class:`BatchNotFound`, exactly as if
it did not exist.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asrserve.auth.principal import Principal
from asrserve.batch_api.models import COMPLETION_WINDOW, ENDPOINTS, Batch, BatchStatus, new_batch_id
from asrserve.batch_api.store import BatchStore
from asrserve.errors import Conflict, InvalidRequest, NotFound, shown
from asrserve.files.models import FilePurpose
from asrserve.requests import lone_surrogate
from asrserve.service.files import Files
from asrserve.service.jobs import Service, check_callback
from asrserve.vocabulary import Priority

MAX_METADATA = 16
CALLBACK_PARAM = "metadata.callback_url"
INPUT_PARAM = "input_file_id"


class BatchNotFound(NotFound):
    default_code = "batch_not_found"


@dataclass(frozen=True)
class NewBatch:
    """What a client asks for: the batch's request file and where its requests go."""

    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None = None


class Batches:
    def __init__(self, jobs: Service, files: Files, store: BatchStore) -> None:
        self.settings = jobs.settings
        self._jobs = jobs
        self._files = files
        self.store = store

    async def create(self, new: NewBatch, principal: Principal) -> Batch:
        """Accept a JSONL file of transcription requests: admitted as offline,
        lowest-priority work."""
        where = lone_surrogate(dataclasses.asdict(new))
        if where is not None:
            message = f"{where} holds a lone surrogate (an unpaired \\ud800-\\udfff escape)"
            raise InvalidRequest(message, param=where, code="invalid_encoding")
        endpoint, metadata = new.endpoint, new.metadata
        if endpoint not in ENDPOINTS:
            served = " or ".join(f"'{endpoint}'" for endpoint in ENDPOINTS)
            message = f"endpoint must be {served} (the endpoints batches serve here)"
            raise InvalidRequest(message, param="endpoint")
        if new.completion_window != COMPLETION_WINDOW:
            message = f"completion_window must be '{COMPLETION_WINDOW}'"
            raise InvalidRequest(message, param="completion_window")
        self._check_metadata(metadata)
        record = await self._files.found(new.input_file_id, principal)  # param: file_id
        if record.purpose is not FilePurpose.BATCH:
            message = f"file '{record.id}' has purpose '{record.purpose.value}', not 'batch'"
            raise InvalidRequest(message, param=INPUT_PARAM, code="invalid_file_purpose")
        requests = await self._files.batch_requests(record, INPUT_PARAM)
        admission = self._jobs.admission
        await admission.admit(Priority.OFFLINE, 0.0, count=requests, owner=principal.owner)
        now = int(time.time())
        batch = Batch(
            id=new_batch_id(),
            endpoint=endpoint,
            input_file_id=record.id,
            created_at=now,
            expires_at=now + int(self.settings.batch_api_window_s),
            metadata=metadata,
            owner=principal.owner,
        )
        await self.store.create(batch)
        self._jobs.events.batch_api_changed()
        return batch

    async def page(self, principal: Principal, limit: int, after: str | None) -> list[Batch]:
        return await self.store.page(limit=limit, after=after, owner=principal.scope)

    async def found(self, batch_id: str, principal: Principal) -> Batch:
        """The batch if the caller may see it; :class:`BatchNotFound` otherwise."""
        missing = BatchNotFound(f"no batch '{shown(batch_id)}'", param="batch_id")
        return principal.visible(await self.store.get(batch_id), missing)

    async def wait(self, batch: Batch, timeout: float) -> Batch:
        """The batch once it has ended, or as it stands after ``timeout`` seconds."""
        if not timeout or batch.status.finished:
            return batch
        ended = await self._jobs.wait_until(
            batch.id, lambda: self.store.get(batch.id), lambda b: b.status.finished, timeout
        )
        return ended or batch

    async def view(self, batch: Batch) -> dict[str, Any]:
        """The batch as OpenAI shows it; while it runs, with the audio its jobs have done."""
        if batch.status is not BatchStatus.IN_PROGRESS:
            return batch.view()
        backlog = await self._jobs.store.batch_backlog(batch.id)
        return batch.view(audio_done=batch.audio_done(backlog))

    async def cancel(self, batch_id: str, principal: Principal) -> Batch:
        """Stop a batch: requests not finished are cancelled, finished results are kept;
        :class:`Conflict` once it has ended."""
        batch = await self.found(batch_id, principal)

        def mutate(current: Batch) -> Batch | None:
            if current.status not in (BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS):
                return None
            update = {"status": BatchStatus.CANCELLING, "cancelling_at": int(time.time())}
            return current.model_copy(update=update)

        cancelled = await self.store.update(batch.id, mutate)
        if cancelled is None:
            current = await self.found(batch_id, principal)
            if current.status is BatchStatus.CANCELLING:
                return current
            message = f"the batch is {current.status.value}; it can no longer be cancelled"
            raise Conflict(message, code="batch_not_cancellable")
        self._jobs.events.batch_api_changed()
        return cancelled

    def _check_metadata(self, metadata: Mapping[str, str] | None) -> None:
        if not metadata:
            return
        if len(metadata) > MAX_METADATA:
            message = f"metadata holds at most {MAX_METADATA} pairs"
            raise InvalidRequest(message, param="metadata")
        for key, value in metadata.items():
            if len(key) > 64 or len(value) > 512:
                message = "metadata keys are at most 64 characters and values at most 512"
                raise InvalidRequest(message, param="metadata")
        callback = metadata.get("callback_url")
        if callback:
            check_callback(callback, self.settings, CALLBACK_PARAM)
