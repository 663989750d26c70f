"""Asynchronous jobs: submit, poll or long-poll, fetch the transcript, cancel, page."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from asrserve.api.access import caller
from asrserve.api.cue_params import cue_fields
from asrserve.api.deps import ApiContext, context
from asrserve.api.intake import ready_model, receive_transcription
from asrserve.api.openapi import WORK_ERRORS, answer, errors, transcription_form
from asrserve.api.responses import transcript_response
from asrserve.api.schemas import job_view, page_body
from asrserve.api.streams import KEEPALIVE_S, event_stream, job_events
from asrserve.api.uploads import upload_key
from asrserve.auth.principal import Principal
from asrserve.formats import ResponseFormat
from asrserve.jobs.models import JobStatus
from asrserve.requests import Fields, parse_cue_limits
from asrserve.vocabulary import Priority

router = APIRouter(prefix="/v1/jobs")
Ctx = Annotated[ApiContext, Depends(context)]
Caller = Annotated[Principal, Depends(caller)]
UNKNOWN = "No such job, or not the caller's (each key sees only its own)."
TOO_MANY_WAITS = (
    "The key holds `ASRSERVE_MAX_WAITS_PER_KEY` event streams and long polls (`too_many_waits`)."
)
JobId = Annotated[str, Path(description="The job's `id`, as `POST /v1/jobs` answered it.")]
Status = Annotated[
    JobStatus | None, Query(description="Only the jobs in this status; omitted, any.")
]
Limit = Annotated[int, Query(ge=1, le=100, description="The most jobs the page holds.")]
After = Annotated[
    str | None,
    Query(
        description="The previous page's `last_id`: the page goes on with the jobs after it; "
        "omitted, from the newest."
    ),
]
Wait = Annotated[
    float,
    Query(
        ge=0,
        description="Seconds to wait for an unfinished job to finish before answering (a long "
        "poll), cut to `ASRSERVE_MAX_WAIT_PARAM_S`; 0: answer at once.",
    ),
]
Format = Annotated[
    ResponseFormat,
    Query(description="The transcript's format; `srt` and `vtt` take the subtitle limits."),
]
JOB = (
    "The job's object: `id`, `object`, `status`, `priority`, `filename`, `audio_bytes`, "
    "`audio_duration`, `options`, `created_at`, `started_at`, `finished_at`, `attempts`, "
    "`error`, `progress`, `result` (the transcript as `verbose_json` writes it, once it "
    "succeeded; else null) and, with a `callback_url`, `webhook` (its delivery)."
)
SHOWN = "The job's object, as `GET /v1/jobs/{job_id}` shows it"


@router.post(
    "",
    status_code=202,
    response_description=f"{SHOWN}, `status` `queued`; the `Location` header is its URL.",
    openapi_extra=transcription_form(sync=False),
    responses=errors(WORK_ERRORS),
)
async def create_job(
    request: Request, ctx: Annotated[ApiContext, Depends(ready_model)], principal: Caller
) -> Response:
    """Accept a file for transcription; answers 202 once the job is durably queued.

    The form of ``POST /v1/audio/transcriptions`` plus an optional ``callback_url``: 202
    with the job and a ``Location`` header. ``response_format=srt`` or ``vtt`` keeps word
    timestamps for the subtitles; their limits are given when the transcript is fetched
    (here: 400 naming the field)."""
    service = ctx.service
    job_id, upload, parsed = await receive_transcription(
        request,
        ctx,
        service.settings.max_job_upload_bytes,
        callback=True,
        languages=principal.languages,
        shaping=False,
    )
    job = await service.submit(job_id, upload, parsed, Priority.ASYNC, principal)
    return JSONResponse(job_view(job), status_code=202, headers={"Location": f"/v1/jobs/{job.id}"})


@router.get(
    "",
    response_description='`{"object": "list", "data", "first_id", "last_id", "has_more"}`: '
    "up to `limit` job objects, newest first; `has_more` when more follow `last_id`.",
)
async def list_jobs(
    ctx: Ctx,
    principal: Caller,
    status: Status = None,
    limit: Limit = 20,
    after: After = None,
) -> dict[str, Any]:
    """The caller's jobs, newest first; ``after`` is the ``last_id`` of the previous page."""
    jobs = await ctx.service.jobs(principal.scope, status=status, limit=limit + 1, after=after)
    return page_body([job_view(job) for job in jobs], limit)


@router.get(
    "/{job_id}",
    response_description=JOB,
    responses=errors(s404=UNKNOWN, s429=TOO_MANY_WAITS),
)
async def get_job(
    job_id: JobId,
    ctx: Ctx,
    principal: Caller,
    request: Request,
    wait: Wait = 0,
) -> dict[str, Any]:
    """Status, timings, attempts, error, ``progress`` and the result once done.

    ``progress``: ``chunks_done``/``chunks_total`` windows, ``audio_done_s``/``audio_total_s``
    seconds of speech, ``eta_s`` at the job's measured speed; null until its first window is
    known, the totals growing while the rest of the file is decoded. ``?wait=N`` long-polls:
    answers as soon as the job finishes, or after N s (capped by
    ``ASRSERVE_MAX_WAIT_PARAM_S``)."""
    service = ctx.service
    job = await service.job(job_id, principal)
    timeout = min(wait, service.settings.max_wait_param_s)
    if timeout and not job.status.finished:
        with ctx.waits.slot(upload_key(request)):
            job = await service.job(job_id, principal, wait=timeout)
    return job_view(job)


@router.get(
    "/{job_id}/events",
    response_class=Response,
    responses=answer(
        "Server-sent events `status`, `progress`, `segment` and `done`, each's data one line "
        "of JSON.",
        "text/event-stream",
    )
    | errors(s404=UNKNOWN, s429=TOO_MANY_WAITS),
)
async def follow_job(job_id: JobId, ctx: Ctx, principal: Caller, request: Request) -> Response:
    """Server-sent events as the job changes: ``status``, ``progress``, ``segment`` (each
    segment whose text is final, in order) and ``done`` (the finished job); the stream ends
    with the job, or after ``events_stream_s`` (a client reconnects to go on).

    ``segment`` carries ``id``, ``start``, ``end`` and ``text``; ``done`` the finished job, as
    ``GET /v1/jobs/{id}`` shows it. Open at most ``ASRSERVE_EVENTS_STREAM_S`` (1 h); a comment
    line every 15 s keeps proxies from closing it."""
    service = ctx.service
    await service.job(job_id, principal)
    give_back = ctx.waits.take(upload_key(request))
    jobs = service.follow(job_id, service.settings.events_stream_s, KEEPALIVE_S)
    return event_stream(job_events(jobs), {}, give_back)


@router.get(
    "/{job_id}/transcript",
    response_class=Response,
    responses=answer(
        "The transcript in `format` (`json`, `verbose_json` and `diarized_json` as JSON).",
        "application/json",
        "text/plain",
        "application/x-subrip",
        "text/vtt",
    )
    | errors(
        s404=UNKNOWN,
        s409="The job is not finished, or was cancelled.",
        s400="A subtitle limit with another format.",
    ),
)
async def get_transcript(
    job_id: JobId,
    ctx: Ctx,
    principal: Caller,
    shaping: Annotated[Fields, Depends(cue_fields)],
    format: Format = ResponseFormat.JSON,
) -> Response:
    """The finished job's transcript in ``format``; subtitles cut as the shaping parameters
    say (from word timestamps if the job has them: submitted as srt or vtt).

    Any response format; ``srt`` and ``vtt`` take the subtitle limits as query parameters
    (defaults as for transcriptions; docs/calling.md#subtitles)."""
    subtitles = format in (ResponseFormat.SRT, ResponseFormat.VTT)
    cues = parse_cue_limits(shaping, subtitles, needs="format srt or vtt")
    job = await ctx.service.job(job_id, principal)
    words = job.options.word_timestamps
    return await transcript_response(ctx.renders, job, format, words=words, cues=cues)


@router.delete(
    "/{job_id}",
    response_description=f"{SHOWN}: `cancelled`, or as it was if it had finished.",
    responses=errors(s404=UNKNOWN),
)
async def cancel_job(job_id: JobId, ctx: Ctx, principal: Caller) -> dict[str, Any]:
    """Cancel a queued or running job (its windows not yet run are dropped); a finished job
    is returned unchanged."""
    return job_view(await ctx.service.cancel_visible(job_id, principal))
