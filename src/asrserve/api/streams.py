"""Server-sent events: a transcript as its text becomes final (OpenAI's streamed
transcription, ``stream=true``) and a job's changes (``GET /v1/jobs/{id}/events``).

Both read the job as :meth:`Service.follow` yields it: the store is the truth, events only
wake the reader, so a follower on another node than the worker sees the same stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol

from fastapi.responses import StreamingResponse

from asrserve.api.schemas import job_view, progress_view
from asrserve.api.waits import HeldStream
from asrserve.errors import AsrError, Conflict, DeadlineExceeded, StoredError
from asrserve.formats import diarized_segment, logprobs_view
from asrserve.jobs.models import Job, JobStatus
from asrserve.transcript import TokenLogprob, Transcript

KEEPALIVE_S = 15.0  # a comment line this often keeps proxies from closing an idle stream
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class _Text(Protocol):
    """A segment, final or partial."""

    @property
    def id(self) -> int: ...
    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...
    @property
    def text(self) -> str: ...
    @property
    def logprobs(self) -> Sequence[TokenLogprob] | None: ...


def _kept() -> None:
    """Nothing to give back."""


async def _nothing() -> None:
    """Nothing to do once the stream has ended."""


def event_stream(
    events: AsyncIterator[str],
    headers: dict[str, str],
    give_back: Callable[[], None] = _kept,
    ended: Callable[[], Awaitable[None]] = _nothing,
) -> StreamingResponse:
    """Server-sent events; ``give_back`` (a held wait) and then ``ended`` are called when
    the stream ends, however it ends."""
    merged = {**HEADERS, **headers}
    return HeldStream(events, give_back, ended, media_type="text/event-stream", headers=merged)


def sse(data: dict[str, Any], event: str | None = None) -> str:
    """One event: its name (if any) and its data as one line of JSON."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _final_segments(job: Job) -> Sequence[_Text]:
    """The job's segments whose text will not change: all of them once it has succeeded."""
    if job.status is JobStatus.SUCCEEDED and job.result is not None:
        return job.result.segments
    return job.progress.segments if job.progress is not None else ()


class _Deltas:
    """Pieces of text whose concatenation is always the text so far as the transcript
    gives it (leading and trailing whitespace stripped): trailing whitespace waits for the
    piece after it."""

    def __init__(self) -> None:
        self.sent = 0  # segments
        self._started = False
        self._held = ""
        # the log probabilities of the tokens whose text is not sent yet (include[]=logprobs)
        self._tokens: list[TokenLogprob] = []
        self.logprobs: list[list[TokenLogprob]] = []  # of each piece of the last call

    def of(self, segments: Sequence[_Text]) -> list[str]:
        pieces: list[str] = []
        self.logprobs = []
        for segment in segments[self.sent :]:
            piece = self._held + segment.text
            self._tokens += segment.logprobs or ()
            if not self._started:
                piece = piece.lstrip()
            text = piece.rstrip()
            self._held = piece[len(text) :]
            if text:
                self._started = True
                pieces.append(text)
                self.logprobs.append(self._tokens)
                self._tokens = []
        self.sent = max(self.sent, len(segments))
        return pieces


def _error(exc: AsrError) -> str:
    return sse(exc.body())


async def transcript_events(jobs: AsyncIterator[Job], timeout: float) -> AsyncIterator[str]:
    """OpenAI's ``transcript.text.delta`` events as the text becomes final, then (diarized)
    a ``transcript.text.segment`` event for each segment with its speaker, then
    ``transcript.text.done``; an ``error`` object (which the openai client raises) if the
    job fails, is cancelled or is not done within ``timeout`` seconds."""
    deltas, last = _Deltas(), None
    async for job in jobs:
        last = job
        pieces = deltas.of(_final_segments(job))
        for piece, tokens in zip(pieces, deltas.logprobs, strict=True):
            delta: dict[str, Any] = {"type": "transcript.text.delta", "delta": piece}
            if job.options.logprobs:
                delta["logprobs"] = logprobs_view(tokens)
            yield sse(delta)
        if not pieces and not job.status.finished:
            yield ": keep-alive\n\n"
    if last is not None and last.status is JobStatus.SUCCEEDED and last.result is not None:
        for event in _finished(last, last.result):
            yield event
    elif last is not None and last.status is JobStatus.FAILED and last.error is not None:
        error = last.error
        yield _error(StoredError(error.status, error.message, code=error.code))
    elif last is not None and last.status is JobStatus.CANCELLED:
        yield _error(Conflict("the job was cancelled", code="job_cancelled"))
    else:
        yield _error(DeadlineExceeded(f"transcription did not finish within {timeout:g} s"))


def _finished(job: Job, result: Transcript) -> list[str]:
    """A succeeded job's last events: (diarized) each segment with its speaker, known once
    the whole file is; then ``transcript.text.done``."""
    events = []
    if job.options.diarization is not None:
        events = [sse(diarized_segment(segment)) for segment in result.segments]
    usage = {"type": "duration", "seconds": round(result.duration)}
    done: dict[str, Any] = {"type": "transcript.text.done", "text": result.text, "usage": usage}
    if job.options.logprobs:
        done["logprobs"] = logprobs_view(result.logprobs)
    return [*events, sse(done)]


async def job_events(jobs: AsyncIterator[Job]) -> AsyncIterator[str]:
    """A job's ``status`` changes, ``progress`` and each ``segment`` whose text is final,
    then ``done`` with the finished job (as ``GET /v1/jobs/{id}`` shows it); a comment line
    when nothing changed for a while."""
    status: JobStatus | None = None
    progress: tuple[int, int] | None = None
    sent = 0
    async for job in jobs:
        quiet = True
        if job.status is not status:
            status, quiet = job.status, False
            yield sse({"id": job.id, "status": job.status.value}, "status")
        view = progress_view(job)
        if view is not None and not job.status.finished:
            shown = (view["chunks_done"], view["chunks_total"])
            if shown != progress:
                progress, quiet = shown, False
                yield sse(view, "progress")
        segments = _final_segments(job)
        for segment in segments[sent:]:
            quiet = False
            view = {"id": segment.id, "start": segment.start, "end": segment.end}
            yield sse({**view, "text": segment.text}, "segment")
        sent = max(sent, len(segments))
        if job.status.finished:
            yield sse(job_view(job), "done")
            return
        if quiet:
            yield ": keep-alive\n\n"
