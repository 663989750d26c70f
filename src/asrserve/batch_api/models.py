"""Batches and their items, in the shape of OpenAI's batch object."""

from __future__ import annotations

import secrets
import time
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from asrserve.formats import ResponseFormat
from asrserve.jobs.models import BatchBacklog, JobError, WebhookStatus
from asrserve.subtitles import CueLimits
from asrserve.vocabulary import Task

ENDPOINT = "/v1/audio/transcriptions"
TRANSLATIONS = "/v1/audio/translations"
ENDPOINTS = {ENDPOINT: Task.TRANSCRIBE, TRANSLATIONS: Task.TRANSLATE}
"""The endpoints a batch may serve, and the task each line of such a batch runs."""
COMPLETION_WINDOW = "24h"


class BatchStatus(StrEnum):
    VALIDATING = "validating"
    FAILED = "failed"
    IN_PROGRESS = "in_progress"
    FINALIZING = "finalizing"
    COMPLETED = "completed"
    EXPIRED = "expired"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (
            BatchStatus.FAILED,
            BatchStatus.COMPLETED,
            BatchStatus.EXPIRED,
            BatchStatus.CANCELLED,
        )


class RequestCounts(BaseModel):
    model_config = ConfigDict(frozen=True)

    total: int = 0
    completed: int = 0
    failed: int = 0


class BatchErrorLine(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: str
    message: str
    param: str | None = None
    line: int | None = None


class Batch(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    object: Literal["batch"] = "batch"
    endpoint: str = ENDPOINT
    errors: list[BatchErrorLine] | None = None
    input_file_id: str
    completion_window: str = COMPLETION_WINDOW
    status: BatchStatus = BatchStatus.VALIDATING
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: int = Field(default_factory=lambda: int(time.time()))
    in_progress_at: int | None = None
    expires_at: int
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    request_counts: RequestCounts = RequestCounts()
    metadata: dict[str, str] | None = None
    # Not part of OpenAI's object: audio seconds accepted, requests rejected before they
    # became jobs, and the end-of-batch webhook.
    audio_seconds: float = 0.0
    rejected: int = 0
    owner: str | None = None  # the API key that created it
    webhook_status: WebhookStatus | None = None
    webhook_attempts: int = 0
    webhook_last_error: str | None = None

    @property
    def callback_url(self) -> str | None:
        return (self.metadata or {}).get("callback_url")

    def view(self, audio_done: float | None = None) -> dict[str, Any]:
        """The batch as the API shows it; ``audio_done``: see :meth:`audio_done`."""
        hidden = {"rejected", "owner", "webhook_status", "webhook_attempts", "webhook_last_error"}
        body = self.model_dump(mode="json", exclude=hidden)
        errors = body.pop("errors")
        body["errors"] = None if errors is None else {"object": "list", "data": errors}
        body["audio_seconds_done"] = audio_done
        return body

    def audio_done(self, backlog: BatchBacklog) -> float:
        """Of the accepted audio, the seconds transcribed so far: all of it but what the
        batch's queued jobs hold and its running jobs have left, a running job's share
        taken from its progress (windows done, in seconds of speech)."""
        left = backlog.queued_s
        for job in backlog.running:
            progress = job.progress
            share = 0.0
            if progress is not None and progress.audio_total_s > 0:
                share = min(progress.audio_done_s / progress.audio_total_s, 1.0)
            left += job.admitted_s * (1.0 - share)
        return round(max(self.audio_seconds - left, 0.0), 3)


class BatchItem(BaseModel):
    """One request line of a batch: either a job, or an error found before any job existed."""

    model_config = ConfigDict(frozen=True)

    batch_id: str
    line: int  # 1-based line number in the input file
    custom_id: str
    job_id: str | None = None
    response_format: ResponseFormat = ResponseFormat.JSON
    words: bool = False
    cues: CueLimits | None = None  # how srt and vtt are cut (None: the defaults)
    error: JobError | None = None


def new_batch_id() -> str:
    return f"batch_{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


def item_job_id(batch_id: str, line: int) -> str:
    """Deterministic, so creating a batch's jobs again after a crash creates no duplicate."""
    return f"job_{batch_id.removeprefix('batch_')}_{line}"
