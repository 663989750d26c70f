"""Building HTTP responses from transcripts and jobs.

A transcript is rendered (subtitles cut, JSON encoded) in a worker thread, at most
:data:`RENDERS` at a time on a node: a large render (hours of words, karaoke cues) never
holds the event loop that every tenant's requests share. A rendered body over
:data:`MAX_RENDER_BYTES` is refused, with what to ask for instead.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from fastapi.responses import Response

from asrserve.errors import Conflict, StoredError, TooLarge
from asrserve.formats import ResponseFormat, render
from asrserve.jobs.models import Job, JobStatus
from asrserve.subtitles import CueLimits
from asrserve.transcript import Transcript

RENDERS = 2  # renders running at once on a node (threads; each holds one core)
MAX_RENDER_BYTES = 64 * 1024 * 1024


class Renders:
    """A node's transcript renders: in worker threads, :data:`RENDERS` at a time."""

    def __init__(self, at_once: int = RENDERS) -> None:
        self._running = asyncio.Semaphore(at_once)

    async def run(self, rendered: Callable[[], bytes]) -> bytes:
        """``rendered()`` in a worker thread; TooLarge past :data:`MAX_RENDER_BYTES`."""
        async with self._running:
            body = await asyncio.to_thread(rendered)
        if len(body) > MAX_RENDER_BYTES:
            raise TooLarge(
                f"the transcript rendered so is {len(body) / 1e6:.0f} MB, over the"
                f" {MAX_RENDER_BYTES // (1024 * 1024)} MiB a response may hold: ask for"
                " narrower cues (max_words_per_cue, max_line_width) or another format",
                code="response_too_large",
            )
        return body


async def transcript_response(
    renders: Renders,
    job: Job,
    fmt: ResponseFormat,
    *,
    words: bool,
    cues: CueLimits | None = None,
) -> Response:
    transcript, logprobs = finished_transcript(job), job.options.logprobs

    def rendered() -> bytes:
        body = render(transcript, fmt, words=words, cues=cues, logprobs=logprobs)
        if isinstance(body, dict):  # as Starlette's JSONResponse writes it
            text = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            return text.encode()
        return body.encode()

    return Response(await renders.run(rendered), media_type=fmt.media_type)


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
