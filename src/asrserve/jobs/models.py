"""Jobs: the durable unit of work the API accepts and the workers complete."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from asrserve.errors import STATUS_OF_KIND, AsrError
from asrserve.transcript import TokenLogprob, Transcript
from asrserve.vocabulary import KnownSpeaker, Priority, TranscriptionOptions


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


class WebhookStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class JobError(BaseModel):
    """Why a job failed; ``status`` is the HTTP status a synchronous caller receives."""

    model_config = ConfigDict(frozen=True)

    status: int
    code: str
    message: str
    # the request field at fault, where the failure names one other than the audio (a
    # known speaker's reference, checked where the job runs)
    param: str | None = None

    @classmethod
    def of(cls, exc: AsrError) -> JobError:
        """The job's failure as the core error that caused it: its kind's status."""
        param = exc.param if exc.param and exc.param.startswith("known_speaker") else None
        status = STATUS_OF_KIND[exc.kind]
        return cls(status=status, code=exc.code or exc.kind, message=exc.message, param=param)


class PartialSegment(BaseModel):
    """A segment of a running job whose text is final (all windows before it are done)."""

    model_config = ConfigDict(frozen=True)

    id: int
    start: float
    end: float
    text: str
    logprobs: tuple[TokenLogprob, ...] | None = None  # its text tokens' (options.logprobs)


class Progress(BaseModel):
    """How far a running job is: its windows done, in seconds of speech (the audio that is
    decoded: silence the VAD removed is not counted), and the text that is final so far."""

    model_config = ConfigDict(frozen=True)

    chunks_done: int = 0
    chunks_total: int = 0
    audio_done_s: float = 0.0
    audio_total_s: float = 0.0
    updated_at: float = Field(default_factory=time.time)
    # The segments of the windows done without a gap from the first, in order. Cleared when
    # the job ends (its result holds them all).
    segments: tuple[PartialSegment, ...] = ()

    def eta_s(self, started_at: float | None, now: float) -> float | None:
        """Seconds left at the speed measured since the job started (None: nothing done yet)."""
        if started_at is None or self.audio_done_s <= 0 or self.updated_at <= started_at:
            return None
        speed = self.audio_done_s / (self.updated_at - started_at)
        left = (self.audio_total_s - self.audio_done_s) / speed - (now - self.updated_at)
        return round(max(left, 0.0), 3)


class Job(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    status: JobStatus = JobStatus.QUEUED
    priority: Priority = Priority.ASYNC
    options: TranscriptionOptions = TranscriptionOptions()
    filename: str = ""
    audio_path: str = ""
    audio_bytes: int = 0
    audio_duration: float | None = None
    # Audio seconds counted in the admission backlog when the job was accepted: exactly what
    # is taken off again when it ends (audio_duration changes to the decoded length).
    admitted_s: float = 0.0
    created_at: float = Field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    attempts: int = 0
    error: JobError | None = None
    result: Transcript | None = None
    callback_url: str | None = None
    deadline_at: float | None = None  # epoch s; work not started by then is dropped (504)
    webhook_status: WebhookStatus | None = None
    webhook_attempts: int = 0
    webhook_last_error: str | None = None
    batch_id: str | None = None  # set for the items of a Batch API batch
    owns_audio: bool = True  # False: the audio belongs to a stored file, never deleted with the job
    owner: str | None = None  # the API key that submitted it (None: auth is off)
    progress: Progress | None = None  # None until the running attempt knows its windows
    # How long its model stays loaded after it (s; -1 forever; None: the model's default)
    keep_alive: float | None = None
    # A tenant's keep_alive: it may keep the model loaded longer than its default, never
    # release it sooner (another tenant's next request would pay the reload)
    keep_alive_floor: bool = False

    @property
    def known_speakers(self) -> tuple[KnownSpeaker, ...]:
        """The speakers its diarization names from references (their blobs go with it)."""
        diarization = self.options.diarization
        return () if diarization is None else diarization.known


def new_job_id() -> str:
    """Sortable by creation time (ms prefix), unguessable (random suffix)."""
    return f"job_{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


def new_job_id_at(created: float) -> str:
    """The smallest id a job created at ``created`` (epoch seconds) can have."""
    return f"job_{int(created * 1000):012x}"


@dataclass(frozen=True)
class BatchBacklog:
    """What of a batch is not finished: the audio its queued jobs were admitted with, in
    seconds, and its running jobs (each job's progress tells how far it is)."""

    queued_s: float
    running: list[Job]
