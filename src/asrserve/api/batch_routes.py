"""OpenAI-compatible Batch API, for ``/v1/audio/transcriptions`` and ``/v1/audio/translations``
requests (one endpoint a batch)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from asrserve.api.access import caller
from asrserve.api.deps import ApiContext, context
from asrserve.api.errors import ApiError
from asrserve.api.file_routes import count_batch_requests
from asrserve.api.file_routes import found as found_file
from asrserve.api.schemas import page_body
from asrserve.api.uploads import upload_key
from asrserve.auth.principal import Principal
from asrserve.batch_api.models import (
    COMPLETION_WINDOW,
    ENDPOINTS,
    Batch,
    BatchStatus,
    new_batch_id,
)
from asrserve.errors import shown
from asrserve.files.models import FilePurpose, StoredFile
from asrserve.jobs.models import Priority
from asrserve.requests import lone_surrogate, parse_callback
from asrserve.service.jobs import check_callback
from asrserve.settings import Settings

router = APIRouter(prefix="/v1/batches")
Ctx = Annotated[ApiContext, Depends(context)]
Caller = Annotated[Principal, Depends(caller)]

MAX_METADATA = 16
CALLBACK_PARAM = "metadata.callback_url"


class CreateBatch(BaseModel):
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None = None


@router.post("")
async def create_batch(body: CreateBatch, ctx: Ctx, principal: Caller) -> dict[str, Any]:
    """Accept a JSONL file of transcription requests; they run as offline, lowest-priority
    work. ``metadata.callback_url`` gets a POST of the batch when it ends."""
    where = lone_surrogate(body.model_dump())
    if where is not None:
        message = f"{where} holds a lone surrogate (an unpaired \\ud800-\\udfff escape)"
        raise ApiError(400, message, param=where, code="invalid_encoding")
    if body.endpoint not in ENDPOINTS:
        served = " or ".join(f"'{endpoint}'" for endpoint in ENDPOINTS)
        message = f"endpoint must be {served} (the endpoints batches serve here)"
        raise ApiError(400, message, param="endpoint")
    if body.completion_window != COMPLETION_WINDOW:
        message = f"completion_window must be '{COMPLETION_WINDOW}'"
        raise ApiError(400, message, param="completion_window")
    _check_metadata(body.metadata, ctx.service.settings)
    record = await found_file(ctx, body.input_file_id, principal)
    if record.purpose is not FilePurpose.BATCH:
        message = f"file '{record.id}' has purpose '{record.purpose.value}', not 'batch'"
        raise ApiError(400, message, param="input_file_id", code="invalid_file_purpose")
    requests = await _requests(ctx, record)
    await ctx.service.admission.admit(Priority.OFFLINE, 0.0, count=requests, owner=principal.owner)
    now = int(time.time())
    batch = Batch(
        id=new_batch_id(),
        endpoint=body.endpoint,
        input_file_id=record.id,
        created_at=now,
        expires_at=now + int(ctx.service.settings.batch_api_window_s),
        metadata=body.metadata,
        owner=principal.owner,
    )
    await ctx.batches.create(batch)
    ctx.service.events.batch_api_changed()
    return batch.view()


@router.get("")
async def list_batches(
    ctx: Ctx,
    principal: Caller,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    after: str | None = None,
) -> dict[str, Any]:
    batches = await ctx.batches.page(limit=limit + 1, after=after, owner=principal.scope)
    return page_body([batch.view() for batch in batches], limit)


@router.get("/{batch_id}")
async def get_batch(
    batch_id: str,
    ctx: Ctx,
    principal: Caller,
    request: Request,
    wait: Annotated[float, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """``?wait=N`` long-polls: answers as soon as the batch has ended, or after N s."""
    batch = await _found(ctx, batch_id, principal)
    timeout = min(wait, ctx.service.settings.max_wait_param_s)
    if timeout and not batch.status.finished:
        with ctx.waits.slot(upload_key(request)):
            ended = await ctx.service.wait_until(
                batch.id, lambda: ctx.batches.get(batch.id), lambda b: b.status.finished, timeout
            )
        batch = ended or batch
    if batch.status is not BatchStatus.IN_PROGRESS:
        return batch.view()
    backlog = await ctx.service.store.batch_backlog(batch.id)
    return batch.view(audio_done=batch.audio_done(backlog))


@router.post("/{batch_id}/cancel")
async def cancel_batch(batch_id: str, ctx: Ctx, principal: Caller) -> dict[str, Any]:
    """Stop a batch: requests not finished are cancelled, finished results are kept."""
    batch = await _found(ctx, batch_id, principal)

    def mutate(current: Batch) -> Batch | None:
        if current.status not in (BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS):
            return None
        update = {"status": BatchStatus.CANCELLING, "cancelling_at": int(time.time())}
        return current.model_copy(update=update)

    cancelled = await ctx.batches.update(batch.id, mutate)
    if cancelled is None:
        current = await _found(ctx, batch_id, principal)
        if current.status is BatchStatus.CANCELLING:
            return current.view()
        message = f"the batch is {current.status.value}; it can no longer be cancelled"
        raise ApiError(409, message, code="batch_not_cancellable")
    ctx.service.events.batch_api_changed()
    return cancelled.view()


async def _found(ctx: ApiContext, batch_id: str, principal: Principal) -> Batch:
    """The batch if the caller may see it; 404 otherwise, as if it did not exist."""
    batch = await ctx.batches.get(batch_id)
    if batch is None or not principal.sees(batch.owner):
        message = f"no batch '{shown(batch_id)}'"
        raise ApiError(404, message, param="batch_id", code="batch_not_found")
    return batch


async def _requests(ctx: ApiContext, record: StoredFile) -> int:
    """The input file's requests, as counted at upload (a file stored before uploads were
    counted is counted now, on the scan threads), for admission; 400 ``too_many_requests``
    over ``batch_api_max_requests``."""
    settings = ctx.service.settings
    count = record.requests
    if count is None:
        try:
            count = await ctx.scan(count_batch_requests, settings.files_dir / record.id, settings)
        except FileNotFoundError:
            message = f"the content of '{record.id}' is gone"
            raise ApiError(404, message, param="input_file_id", code="file_not_found") from None
    limit = settings.batch_api_max_requests
    if count > limit:
        message = f"the input file has more than {limit} requests, the most a batch holds"
        raise ApiError(400, message, param="input_file_id", code="too_many_requests")
    return count


def _check_metadata(metadata: dict[str, str] | None, settings: Settings) -> None:
    if not metadata:
        return
    if len(metadata) > MAX_METADATA:
        raise ApiError(400, f"metadata holds at most {MAX_METADATA} pairs", param="metadata")
    for key, value in metadata.items():
        if len(key) > 64 or len(value) > 512:
            message = "metadata keys are at most 64 characters and values at most 512"
            raise ApiError(400, message, param="metadata")
    callback = parse_callback(metadata.get("callback_url"), CALLBACK_PARAM)
    if callback:
        check_callback(callback, settings, CALLBACK_PARAM)
