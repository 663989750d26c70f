"""The server-sent events of a streamed transcript and of a followed job, from the job
snapshots a follower reads (no server: the streams are pure functions of those)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from asrserve.api.streams import job_events, transcript_events
from asrserve.jobs.models import Job, JobError, JobStatus, PartialSegment, Progress
from asrserve.transcript import Segment, TokenLogprob, Transcript
from asrserve.vocabulary import TranscriptionOptions
from tests.support.loop import Run

TEXTS = ("  Hello there. ", "  ", " How are you?", "\n")  # Whisper's spacing, and worse


def partial(count: int) -> tuple[PartialSegment, ...]:
    return tuple(
        PartialSegment(id=i, start=float(i), end=i + 1.0, text=TEXTS[i]) for i in range(count)
    )


def result() -> Transcript:
    segments = [
        Segment(
            id=i,
            seek=0,
            start=float(i),
            end=i + 1.0,
            text=text,
            tokens=[],
            temperature=0.0,
            avg_logprob=0.0,
            compression_ratio=1.0,
            no_speech_prob=0.0,
        )
        for i, text in enumerate(TEXTS)
    ]
    return Transcript(language="en", duration=4.4, segments=segments)


def running(done: int) -> Job:
    progress = Progress(chunks_done=done, chunks_total=4, segments=partial(done))
    return Job(id="job_1", status=JobStatus.RUNNING, started_at=1.0, progress=progress)


def succeeded() -> Job:
    final = Progress(chunks_done=4, chunks_total=4)
    return Job(id="job_1", status=JobStatus.SUCCEEDED, result=result(), progress=final)


async def snapshots(jobs: Sequence[Job]) -> AsyncIterator[Job]:
    for job in jobs:
        yield job


def parsed(run: Run, events: AsyncIterator[str]) -> list[tuple[str | None, Any]]:
    """(event name, data) per event; (None, None) per comment line."""

    async def collect() -> list[str]:
        return [event async for event in events]

    out: list[tuple[str | None, Any]] = []
    for raw in run(collect()):
        assert raw.endswith("\n\n"), raw
        if raw.startswith(":"):
            out.append((None, None))
            continue
        fields = dict(line.split(": ", 1) for line in raw.strip("\n").split("\n"))
        out.append((fields.get("event"), json.loads(fields["data"])))
    return out


def test_deltas_join_to_the_final_text_as_it_grows(run: Run) -> None:
    """Each delta carries only text that is final; together they are exactly the text,
    whitespace that Whisper puts around segments included (held until text follows)."""
    jobs = [running(0), running(1), running(2), running(3), succeeded()]
    events = parsed(run, transcript_events(snapshots(jobs), 60.0))
    deltas = [data["delta"] for _, data in events if data and data["type"].endswith("delta")]
    assert deltas == ["Hello there.", "    How are you?"]
    done = events[-1][1]
    assert done == {
        "type": "transcript.text.done",
        "text": "Hello there.    How are you?",
        "usage": {"type": "duration", "seconds": 4},
    }
    assert "".join(deltas) == result().text
    assert events[0] == (None, None)  # nothing final yet: a comment keeps the line open


def test_a_finished_job_streams_all_of_its_text_at_once(run: Run) -> None:
    events = parsed(run, transcript_events(snapshots([succeeded()]), 60.0))
    assert [data["type"] for _, data in events] == [
        "transcript.text.delta",
        "transcript.text.delta",
        "transcript.text.done",
    ]


def test_a_failed_job_ends_the_stream_with_its_error(run: Run) -> None:
    error = JobError(status=422, code="audio_undecodable", message="not audio")
    failed = Job(id="job_1", status=JobStatus.FAILED, error=error)
    events = parsed(run, transcript_events(snapshots([running(1), failed]), 60.0))
    assert events[-1][1] == {
        "error": {
            "message": "not audio",
            "type": "invalid_request_error",
            "param": None,
            "code": "audio_undecodable",
        }
    }


def test_a_stream_that_outlives_its_deadline_ends_with_504(run: Run) -> None:
    events = parsed(run, transcript_events(snapshots([running(1), running(1)]), 7.0))
    error = events[-1][1]["error"]
    assert error["code"] == "deadline_exceeded" and "7 s" in error["message"]
    assert error["type"] == "timeout_error"  # as the same 504 says without streaming


def test_job_events_tell_status_progress_segments_then_done(run: Run) -> None:
    queued = Job(id="job_1")
    jobs = [queued, queued, running(0), running(1), running(1), running(3), succeeded()]
    events = parsed(run, job_events(snapshots(jobs)))
    names = [name for name, _ in events]
    assert names == [
        "status",  # queued
        None,  # nothing changed
        "status",  # running
        "progress",  # 0 of 4
        "progress",  # 1 of 4
        "segment",
        None,
        "progress",  # 3 of 4
        "segment",
        "segment",
        "status",  # succeeded
        "segment",  # the last one, from the result
        "done",
    ]
    segments = [data for name, data in events if name == "segment"]
    assert [s["id"] for s in segments] == [0, 1, 2, 3]
    assert "".join(s["text"] for s in segments) == "".join(TEXTS)
    progress = [data for name, data in events if name == "progress"]
    assert [(p["chunks_done"], p["chunks_total"]) for p in progress] == [(0, 4), (1, 4), (3, 4)]
    done = events[-1][1]
    assert done["status"] == "succeeded" and done["result"]["text"] == result().text
    assert done["progress"]["chunks_done"] == 4 and done["progress"]["eta_s"] == 0.0


def test_with_logprobs_each_delta_carries_its_tokens_and_done_carries_all(run: Run) -> None:
    """include[]=logprobs: a delta's tokens are those of the segments it sends (a
    whitespace-only segment's go with the next delta), the done event has every token."""
    tokens = {
        0: [TokenLogprob(token=" Hello", logprob=-0.5, bytes=[32, 72, 101, 108, 108, 111])],
        1: [TokenLogprob(token=" ", logprob=-2.0, bytes=[32])],
        2: [TokenLogprob(token=" How", logprob=-0.25, bytes=[32, 72, 111, 119])],
        3: [],
    }
    options = TranscriptionOptions(logprobs=True, beam_size=1)
    segments = tuple(s.model_copy(update={"logprobs": tuple(tokens[s.id])}) for s in partial(3))
    progress = Progress(chunks_done=3, chunks_total=4, segments=segments)
    running_job = Job(id="job_1", status=JobStatus.RUNNING, progress=progress, options=options)
    final = result().model_copy(
        update={
            "segments": [s.model_copy(update={"logprobs": tokens[s.id]}) for s in result().segments]
        }
    )
    done_job = succeeded().model_copy(update={"result": final, "options": options})
    events = parsed(run, transcript_events(snapshots([running_job, done_job]), 60.0))
    deltas = [data for _, data in events if data and data["type"].endswith("delta")]
    assert [d["delta"] for d in deltas] == ["Hello there.", "    How are you?"]
    assert [[t["logprob"] for t in d["logprobs"]] for d in deltas] == [[-0.5], [-2.0, -0.25]]
    assert deltas[0]["logprobs"][0] == {
        "token": " Hello",
        "logprob": -0.5,
        "bytes": [32, 72, 101, 108, 108, 111],
    }
    done = events[-1][1]
    assert [t["token"] for t in done["logprobs"]] == [" Hello", " ", " How"]


def test_without_logprobs_no_event_carries_them(run: Run) -> None:
    events = parsed(run, transcript_events(snapshots([succeeded()]), 60.0))
    assert all("logprobs" not in data for _, data in events)
