"""JSON views of jobs as the API shows them."""

from __future__ import annotations

import time
from typing import Any

from asrserve.formats import to_verbose
from asrserve.jobs.models import Job

_REFERENCE_AUDIO: Any = {"diarization": {"known": {"__all__": {"audio", "audio_path"}}}}


def job_view(job: Job) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": job.id,
        "object": "transcription.job",
        "status": job.status.value,
        "priority": job.priority.name.lower(),
        "filename": job.filename,
        "audio_bytes": job.audio_bytes,
        "audio_duration": job.audio_duration,
        # known speakers by name: their references' audio (up to 4 MiB) and where it is
        # kept are not echoed
        "options": job.options.model_dump(exclude=_REFERENCE_AUDIO),
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "attempts": job.attempts,
        "error": job.error.model_dump() if job.error else None,
        "progress": progress_view(job),
        "result": None,
    }
    if job.result is not None:
        body["result"] = to_verbose(job.result, words=job.options.word_timestamps)
    if job.callback_url:
        body["webhook"] = {
            "url": job.callback_url,
            "status": job.webhook_status.value if job.webhook_status else None,
            "attempts": job.webhook_attempts,
            "last_error": job.webhook_last_error,
        }
    return body


def progress_view(job: Job) -> dict[str, Any] | None:
    """Windows and seconds of speech done, and the seconds left at the job's measured speed
    (``eta_s``; null until a window is done)."""
    progress = job.progress
    if progress is None:
        return None
    eta = None if job.status.finished else progress.eta_s(job.started_at, time.time())
    return {
        "chunks_done": progress.chunks_done,
        "chunks_total": progress.chunks_total,
        "audio_done_s": progress.audio_done_s,
        "audio_total_s": progress.audio_total_s,
        "eta_s": 0.0 if job.status.finished else eta,
    }


def page_body(data: list[dict[str, Any]], limit: int) -> dict[str, Any]:
    """An OpenAI list page from up to ``limit + 1`` rows (an extra one says there are more)."""
    page = data[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(data) > limit,
    }
