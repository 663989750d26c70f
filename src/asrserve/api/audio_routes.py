"""OpenAI-compatible ``POST /v1/audio/transcriptions`` and ``/v1/models``."""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from asrserve.api.access import caller
from asrserve.api.deps import ApiContext, context
from asrserve.api.errors import ApiError
from asrserve.api.forms import parse_form
from asrserve.api.openapi import transcription_form
from asrserve.api.responses import transcript_response
from asrserve.api.uploads import Upload, receive_upload
from asrserve.auth.principal import Principal
from asrserve.jobs.models import Priority
from asrserve.requests import TranscriptionRequest

router = APIRouter(prefix="/v1")


def ready_model(ctx: ApiContext = Depends(context)) -> ApiContext:  # noqa: B008
    if ctx.catalog is None:
        raise ApiError(503, "the model is still loading", headers={"Retry-After": "5"})
    return ctx


async def receive_transcription(
    request: Request, ctx: ApiContext, max_bytes: int, *, callback: bool = False
) -> tuple[str, Upload, TranscriptionRequest]:
    """Stream the upload to disk and validate the form; nothing is kept if either fails."""
    assert ctx.catalog is not None
    job_id, dest = ctx.service.new_upload_path()
    upload = await receive_upload(request, dest, max_bytes, ctx.uploads)
    return job_id, upload, parse_form(upload, ctx.catalog, callback=callback)


@router.post("/audio/transcriptions", openapi_extra=transcription_form(sync=True))
async def create_transcription(
    request: Request,
    ctx: ApiContext = Depends(ready_model),  # noqa: B008
    principal: Principal = Depends(caller),  # noqa: B008
) -> Response:
    """Transcribe an uploaded file and answer when done (interactive priority)."""
    service = ctx.service
    job_id, upload, parsed = await receive_transcription(
        request, ctx, service.settings.max_sync_upload_bytes
    )
    timeout = min(parsed.deadline_s or math.inf, service.settings.sync_timeout_s)
    job = await service.submit(
        job_id,
        upload,
        parsed.options,
        Priority.INTERACTIVE,
        deadline_s=timeout,
        principal=principal,
    )
    done = await service.wait(job.id, timeout + 1.0)  # the worker fails it at the deadline
    if done is None or not done.status.finished:
        raise ApiError(504, f"transcription did not finish within {timeout:g} s", code="timeout")
    return transcript_response(done, parsed.response_format, words=parsed.words)


@router.get("/models")
async def list_models(ctx: ApiContext = Depends(ready_model)) -> dict[str, Any]:  # noqa: B008
    assert ctx.catalog is not None
    return {"object": "list", "data": [_model_card(model.id) for model in ctx.catalog]}


@router.get("/models/{model_id}")
async def get_model(model_id: str, ctx: ApiContext = Depends(ready_model)) -> dict[str, Any]:  # noqa: B008
    assert ctx.catalog is not None
    model = ctx.catalog.get(model_id)
    if model is None:
        raise ApiError(404, f"no model '{model_id}'", param="model", code="model_not_found")
    return _model_card(model.id)


def _model_card(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "asrserve"}
