"""A running job's progress: which of its windows' text is final, and that reported to the
store and to whoever follows the job (a streamed answer, ``/v1/jobs/{id}/events``).

A window's text is final once it and every window before it are done: windows finish out
of order (they run in different batches), but text is only ever added at the end, so the
text a follower has seen never changes. :class:`WindowProgress` tracks that; a
:class:`ProgressWriter` stores the latest report, one write at a time (a report that comes
while one is being written replaces the one waiting), and wakes the job's followers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from asrserve.audio.chunk import Timeline
from asrserve.engine.base import RawSegment
from asrserve.events import JobEvents
from asrserve.jobs.models import PartialSegment, Progress
from asrserve.jobs.store import JobStore

log = logging.getLogger(__name__)

Report = Callable[[Progress], None]


def ignore(progress: Progress) -> None:
    """A report no one reads (``asrserve transcribe``, tests)."""


class WindowProgress:
    """Reports a job's progress each time the windows whose text is final grow."""

    def __init__(self, durations: Sequence[float], timeline: Timeline, report: Report) -> None:
        self._durations = list(durations)
        self._timeline = timeline
        self._report = report
        self._futures: list[asyncio.Future[list[RawSegment]]] = []
        self._done = 0
        self._audio_done = 0.0
        self._segments: list[PartialSegment] = []
        self._send()

    def watch(self, futures: Sequence[asyncio.Future[list[RawSegment]]]) -> None:
        """The job's next windows, in order, as they are submitted."""
        for future in futures:
            self._futures.append(future)
            future.add_done_callback(self._finished)

    def grow(self, durations: Sequence[float]) -> None:
        """More of the job's windows known (a file still being decoded): the durations of
        all known so far, and the timeline told their regions. Reported at once."""
        self._durations = list(durations)
        self._place()
        self._send()

    def _finished(self, _: object) -> None:
        if self._place():
            self._send()

    def _place(self) -> bool:
        """The text of the windows done without a gap from the first, as far as the timeline
        can place it yet; True if it grew."""
        grew = False
        while self._done < len(self._futures):
            future = self._futures[self._done]
            if not future.done() or future.cancelled() or future.exception() is not None:
                break
            if not self._timeline.covers(future.result()):
                break  # its times reach past the regions known: placed once they are
            placed = self._timeline.place(future.result())
            self._segments += [
                PartialSegment(
                    id=s.id,
                    start=s.start,
                    end=s.end,
                    text=s.text,
                    logprobs=None if s.logprobs is None else tuple(s.logprobs),
                )
                for s in placed
            ]
            self._audio_done += self._durations[self._done]
            self._done += 1
            grew = True
        return grew

    def _send(self) -> None:
        self._report(
            Progress(
                chunks_done=self._done,
                chunks_total=len(self._durations),
                audio_done_s=round(self._audio_done, 3),
                audio_total_s=round(sum(self._durations), 3),
                segments=tuple(self._segments),
            )
        )


class ProgressWriter:
    """Stores a running job's latest progress and wakes its followers. Best effort: a write
    the store refuses is logged and dropped (the next report carries everything)."""

    def __init__(self, store: JobStore, events: JobEvents, job_id: str) -> None:
        self._store = store
        self._events = events
        self._job_id = job_id
        self._waiting: Progress | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def __call__(self, progress: Progress) -> None:
        if self._closed:
            return
        self._waiting = progress.model_copy(update={"updated_at": time.time()})
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._write())

    async def _write(self) -> None:
        while self._waiting is not None:
            progress, self._waiting = self._waiting, None
            try:
                written = await self._store.report(self._job_id, progress)
            except Exception as exc:
                log.warning("progress of job %s not stored: %s", self._job_id, exc)
                continue
            if written is not None:
                self._events.progressed(self._job_id)

    async def close(self) -> None:
        """Stop: reports that wait are dropped, a write under way is let finish (the job's
        end is stored next, and must not be overtaken by it)."""
        self._closed = True
        self._waiting = None
        if self._task is not None:
            await self._task
