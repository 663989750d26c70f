"""OpenAI-compatible ``POST /v1/audio/transcriptions`` and ``/v1/audio/translations``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from asrserve.api.access import caller
from asrserve.api.deps import ApiContext
from asrserve.api.intake import (
    ready_model,
    receive_transcription,
    run_interactive,
    stream_interactive,
)
from asrserve.api.openapi import transcription_form, translation_form
from asrserve.api.responses import transcript_response
from asrserve.auth.principal import Principal
from asrserve.vocabulary import Task

router = APIRouter(prefix="/v1")


async def _answer(request: Request, ctx: ApiContext, principal: Principal, task: Task) -> Response:
    """The synchronous OpenAI routes: one intake, one wait, the transcript as asked for (or
    streamed as it becomes final)."""
    limit = ctx.service.settings.max_sync_upload_bytes
    job_id, upload, parsed = await receive_transcription(
        request, ctx, limit, task=task, languages=principal.languages
    )
    if parsed.stream:
        return await stream_interactive(ctx, job_id, upload, parsed, principal)
    done = await run_interactive(request, ctx, job_id, upload, parsed, principal)
    return await transcript_response(
        ctx.renders, done, parsed.response_format, words=parsed.words, cues=parsed.cues
    )


@router.post("/audio/transcriptions", openapi_extra=transcription_form(sync=True))
async def create_transcription(
    request: Request,
    ctx: ApiContext = Depends(ready_model),  # noqa: B008
    principal: Principal = Depends(caller),  # noqa: B008
) -> Response:
    """Transcribe an uploaded file and answer when done (interactive priority)."""
    return await _answer(request, ctx, principal, Task.TRANSCRIBE)


@router.post("/audio/translations", openapi_extra=translation_form())
async def create_translation(
    request: Request,
    ctx: ApiContext = Depends(ready_model),  # noqa: B008
    principal: Principal = Depends(caller),  # noqa: B008
) -> Response:
    """Translate an uploaded file's speech into English and answer when done (interactive
    priority). An English-only model cannot: 400 ``translation_unsupported``."""
    return await _answer(request, ctx, principal, Task.TRANSLATE)
