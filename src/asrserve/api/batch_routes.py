"""OpenAI-compatible Batch API, for ``/v1/audio/transcriptions`` and ``/v1/audio/translations``
requests (one endpoint a batch). The use cases are :class:`asrserve.service.batches.Batches`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field

from asrserve.api.access import caller
from asrserve.api.deps import ApiContext, context
from asrserve.api.openapi import errors
from asrserve.api.schemas import page_body
from asrserve.api.uploads import upload_key
from asrserve.auth.principal import Principal
from asrserve.service.batches import NewBatch

router = APIRouter(prefix="/v1/batches")
Ctx = Annotated[ApiContext, Depends(context)]
Caller = Annotated[Principal, Depends(caller)]


BatchId = Annotated[str, Path(description="The batch's `id`, as `POST /v1/batches` answered it.")]
Limit = Annotated[int, Query(ge=1, le=100, description="The most batches the page holds.")]
After = Annotated[
    str | None,
    Query(
        description="The previous page's `last_id`: the page goes on with the batches after "
        "it; omitted, from the newest."
    ),
]
Wait = Annotated[
    float,
    Query(
        ge=0,
        description="Seconds to wait for a batch that has not ended to end before answering (a "
        "long poll), cut to `ASRSERVE_MAX_WAIT_PARAM_S`; 0: answer at once.",
    ),
]
BATCH = "The batch object, its fields as `GET /v1/batches/{batch_id}` lists them"
UNKNOWN = "No such batch, or not the caller's."


class CreateBatch(BaseModel):
    input_file_id: str = Field(
        description="The `id` of a file uploaded with purpose `batch`: the requests, one JSON "
        "line each."
    )
    endpoint: str = Field(
        description="Where every line goes: `/v1/audio/transcriptions` or "
        "`/v1/audio/translations` (another: 400)."
    )
    completion_window: str = Field(
        description="`24h`, the one accepted (another: 400); the batch expires after "
        "`ASRSERVE_BATCH_API_WINDOW_S`."
    )
    metadata: dict[str, str] | None = Field(
        None,
        description="Up to 16 pairs (keys at most 64 characters, values 512), shown on the "
        "batch; `callback_url` gets a POST of the batch when it ends.",
    )


@router.post(
    "",
    response_description=f"{BATCH}, `status` `validating`.",
    responses=errors(
        s400="Another endpoint or completion window (`param` names the field); an input file "
        "of more than `ASRSERVE_BATCH_API_MAX_REQUESTS` requests (`too_many_requests`).",
        s413="A body over `ASRSERVE_MAX_JSON_BODY_BYTES` (`request_too_large`, enforced while "
        "reading).",
    ),
)
async def create_batch(body: CreateBatch, ctx: Ctx, principal: Caller) -> dict[str, Any]:
    """Accept a JSONL file of transcription requests; they run as offline, lowest-priority
    work. ``metadata.callback_url`` gets a POST of the batch when it ends.

    JSON ``{input_file_id, endpoint: "/v1/audio/transcriptions" or "/v1/audio/translations",
    completion_window: "24h", metadata}``, at most ``ASRSERVE_MAX_JSON_BODY_BYTES`` (64 KiB).
    The callback is POSTed the batch object (``X-Asrserve-Event: batch.<status>``), retried
    like job webhooks. The input lines' format: docs/calling.md#batch-api."""
    return (await ctx.batches.create(NewBatch(**body.model_dump()), principal)).view()


@router.get(
    "",
    response_description='`{"object": "list", "data", "first_id", "last_id", "has_more"}`: '
    "up to `limit` batch objects (`audio_seconds_done` null), newest first; `has_more` when "
    "more follow `last_id`.",
)
async def list_batches(
    ctx: Ctx,
    principal: Caller,
    limit: Limit = 20,
    after: After = None,
) -> dict[str, Any]:
    """The caller's batches, newest first; ``after`` is the ``last_id`` of the previous page."""
    batches = await ctx.batches.page(principal, limit=limit + 1, after=after)
    return page_body([batch.view() for batch in batches], limit)


@router.get(
    "/{batch_id}",
    response_description="The batch object (fields above).",
    responses=errors(s404=UNKNOWN),
)
async def get_batch(
    batch_id: BatchId,
    ctx: Ctx,
    principal: Caller,
    request: Request,
    wait: Wait = 0,
) -> dict[str, Any]:
    """``?wait=N`` long-polls: answers as soon as the batch has ended, or after N s.

    OpenAI's batch object: ``status`` (``validating``, ``failed``, ``in_progress``,
    ``finalizing``, ``completed``, ``expired``, ``cancelling``, ``cancelled``),
    ``request_counts``, every ``*_at``, ``output_file_id``, ``error_file_id``, ``errors``, plus
    ``audio_seconds`` and, while the batch is in progress, ``audio_seconds_done`` (finished
    requests' audio plus running ones' share of their windows done; null otherwise). The wait
    is capped by ``ASRSERVE_MAX_WAIT_PARAM_S``."""
    batch = await ctx.batches.found(batch_id, principal)
    timeout = min(wait, ctx.service.settings.max_wait_param_s)
    if timeout and not batch.status.finished:
        with ctx.waits.slot(upload_key(request)):
            batch = await ctx.batches.wait(batch, timeout)
    return await ctx.batches.view(batch)


@router.post(
    "/{batch_id}/cancel",
    response_description=f"{BATCH}, `status` `cancelling`.",
    responses=errors(s404=UNKNOWN, s409="The batch has ended."),
)
async def cancel_batch(batch_id: BatchId, ctx: Ctx, principal: Caller) -> dict[str, Any]:
    """Stop a batch: requests not finished are cancelled, finished results are kept."""
    return (await ctx.batches.cancel(batch_id, principal)).view()
