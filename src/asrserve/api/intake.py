"""What every route that takes an upload shares: the model must be ready, the upload is
streamed to disk and its form validated, and a synchronous request waits for its job (or
streams its text) while the client stays; the use cases are ``Service``'s."""

from __future__ import annotations

from fastapi import Depends, Request
from fastapi.responses import Response

from asrserve.api.deps import ApiContext, context
from asrserve.api.disconnect import ClientGone, unless_gone
from asrserve.api.streams import KEEPALIVE_S, event_stream, transcript_events
from asrserve.api.uploads import Upload, receive_upload
from asrserve.auth.principal import Principal
from asrserve.errors import AsrError, ModelLoading
from asrserve.jobs.models import Job
from asrserve.languages import ANY_LANGUAGE, LanguageRule
from asrserve.requests import TranscriptionRequest, parse_request
from asrserve.vocabulary import Task


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
    try:
        parsed = parse_request(
            upload.fields,
            ctx.catalog,
            callback=callback,
            task=task,
            shaping=shaping,
            languages=languages,
        )
    except AsrError:
        upload.remove()
        raise
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
    504 ``deadline_exceeded`` once the synchronous deadline has passed. A client that closes
    the connection first has its job cancelled."""
    job, timeout = await ctx.service.submit_interactive(job_id, upload, parsed, principal)
    try:
        return await unless_gone(request, ctx.service.finished_within(job, timeout))
    except ClientGone:
        await ctx.service.cancel(job.id)
        raise


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
    job, timeout = await ctx.service.submit_interactive(job_id, upload, parsed, principal)
    jobs = ctx.service.follow(job.id, timeout + 1.0, KEEPALIVE_S)

    async def ended() -> None:  # a client gone mid-stream: its job is cancelled (if running)
        await ctx.service.cancel(job.id)

    return event_stream(transcript_events(jobs, timeout), {"X-Job-Id": job.id}, ended=ended)
