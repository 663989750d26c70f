"""Building HTTP responses from transcripts and jobs."""

from __future__ import annotations

from fastapi.responses import JSONResponse, PlainTextResponse, Response

from asrserve.errors import Conflict, StoredError
from asrserve.formats import ResponseFormat, render
from asrserve.jobs.models import Job, JobStatus
from asrserve.subtitles import CueLimits
from asrserve.transcript import Transcript


def transcript_response(
    job: Job, fmt: ResponseFormat, *, words: bool, cues: CueLimits | None = None
) -> Response:
    logprobs = job.options.logprobs
    body = render(finished_transcript(job), fmt, words=words, cues=cues, logprobs=logprobs)
    if isinstance(body, dict):
        return JSONResponse(body)
    return PlainTextResponse(body, media_type=fmt.media_type)


def finished_transcript(job: Job, file_field: str = "file") -> Transcript:
    """The job's transcript, or the error that says why there is none (a failed job's own
    error, naming the field it stored, else the upload's form field)."""
    if job.status is JobStatus.FAILED and job.error is not None:
        error = job.error
        param = error.param or file_field
        raise StoredError(error.status, error.message, param=param, code=error.code)
    if job.status is JobStatus.CANCELLED:
        raise Conflict("the job was cancelled", code="job_cancelled")
    if job.result is None:
        raise Conflict(f"the job is {job.status.value}; no transcript yet", code="job_not_finished")
    return job.result
