"""Building HTTP responses from transcripts and jobs."""

from __future__ import annotations

from fastapi.responses import JSONResponse, PlainTextResponse, Response

from asrserve.api.errors import ApiError
from asrserve.formats import ResponseFormat, render
from asrserve.jobs.models import Job, JobStatus


def transcript_response(job: Job, fmt: ResponseFormat, *, words: bool) -> Response:
    if job.status is JobStatus.FAILED and job.error is not None:
        raise ApiError(job.error.status, job.error.message, param="file", code=job.error.code)
    if job.status is JobStatus.CANCELLED:
        raise ApiError(409, "the job was cancelled", code="job_cancelled")
    if job.result is None:
        raise ApiError(
            409, f"the job is {job.status.value}; no transcript yet", code="job_not_finished"
        )
    body = render(job.result, fmt, words=words)
    if isinstance(body, dict):
        return JSONResponse(body)
    return PlainTextResponse(body, media_type=fmt.media_type)
