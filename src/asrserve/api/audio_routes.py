"""OpenAI-compatible ``POST /v1/audio/transcriptions`` and ``/v1/audio/translations``."""

from __future__ import annotations

import math

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from asrserve.api.access import caller
from asrserve.api.deps import ApiContext, context
from asrserve.api.disconnect import ClientGone, unless_gone
from asrserve.api.forms import parse_form
from asrserve.api.openapi import transcription_form, translation_form
from asrserve.api.responses import transcript_response
from asrserve.api.streams import KEEPALIVE_S, event_stream, transcript_events
from asrserve.api.uploads import Upload, receive_upload
from asrserve.auth.principal import Principal
from asrserve.errors import DeadlineExceeded, ModelLoading
from asrserve.jobs.models import Job
from asrserve.languages import ANY_LANGUAGE, LanguageRule
from asrserve.requests import TranscriptionRequest
from asrserve.vocabulary import Priority, Task

router = APIRouter(prefix="/v1")


def ready_model(ctx: ApiContext = Depends(context)) -> ApiContext:  # noqa: B008
    if ctx.catalog is None:
        raise ModelLoading()
    return ctx


async def receive_transcription(
    request: Request,
    ctx: ApiContext,
    max_bytes: int,
    *,
    callback: bool = False,
    task: Task = Task.TRANSCRIBE,
    shaping: bool = True,
    languages: LanguageRule = ANY_LANGUAGE,
) -> tuple[str, Upload, TranscriptionRequest]:
    """Stream the upload to disk and validate the form (within the ``languages`` the
    caller's key allows); nothing is kept if either fails."""
    assert ctx.catalog is not None
    job_id, dest = ctx.service.new_upload_path()
    upload = await receive_upload(request, dest, max_bytes, ctx.uploads)
    parsed = parse_form(
        upload, ctx.catalog, callback=callback, task=task, shaping=shaping, languages=languages
    )
    return job_id, upload, parsed


async def run_interactive(
    request: Request,
    ctx: ApiContext,
    job_id: str,
    upload: Upload,
    parsed: TranscriptionRequest,
    principal: Principal,
) -> Job:
    """Submit the upload at interactive priority and wait for its end: the finished job, or
    504 ``deadline_exceeded`` once the synchronous deadline has passed. The worker fails the
    job with the same code when it drops the chunks; whichever side notices first, the caller
    sees one answer. A client that closes the connection first has its job cancelled."""
    job, timeout = await _submit_interactive(ctx, job_id, upload, parsed, principal)
    try:
        done = await unless_gone(request, ctx.service.wait(job.id, timeout + 1.0))
    except ClientGone:
        await ctx.service.cancel(job.id)
        raise
    if done is None or not done.status.finished:
        raise DeadlineExceeded(f"transcription did not finish within {timeout:g} s")
    return done


async def _submit_interactive(
    ctx: ApiContext,
    job_id: str,
    upload: Upload,
    parsed: TranscriptionRequest,
    principal: Principal,
) -> tuple[Job, float]:
    """The upload submitted at interactive priority, and the synchronous deadline it has."""
    timeout = min(parsed.deadline_s or math.inf, ctx.service.settings.sync_timeout_s)
    job = await ctx.service.submit(
        job_id,
        upload,
        parsed.options,
        Priority.INTERACTIVE,
        deadline_s=timeout,
        principal=principal,
        keep_alive=parsed.keep_alive,
    )
    return job, timeout


async def stream_interactive(
    ctx: ApiContext,
    job_id: str,
    upload: Upload,
    parsed: TranscriptionRequest,
    principal: Principal,
) -> Response:
    """Submit the upload at interactive priority and answer server-sent events as its text
    becomes final (``stream=true``). A request that cannot be accepted gets its error
    status as without streaming; once accepted, the answer is 200 and a failure comes as an
    ``error`` event. When the stream ends, however it ends, the job is cancelled if it has
    not finished (a client gone: the next event could not be sent)."""
    job, timeout = await _submit_interactive(ctx, job_id, upload, parsed, principal)
    jobs = ctx.service.follow(job.id, timeout + 1.0, KEEPALIVE_S)

    async def ended() -> None:  # a client gone mid-stream: its job is cancelled (if running)
        await ctx.service.cancel(job.id)

    return event_stream(transcript_events(jobs, timeout), {"X-Job-Id": job.id}, ended=ended)


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
