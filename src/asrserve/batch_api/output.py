"""A batch's output and error files: one JSONL line per request, in input order."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from asrserve.batch_api.models import BatchItem
from asrserve.errors import error_body
from asrserve.formats import render
from asrserve.jobs.models import Job, JobError, JobStatus


def split_lines(
    items: Sequence[BatchItem], jobs: Mapping[str, Job], unfinished_code: str
) -> tuple[list[str], list[str]]:
    """(output lines, error lines). Requests that never finished are reported with
    ``unfinished_code`` (``batch_expired``, ``batch_cancelled``) in the error file."""
    output: list[str] = []
    errors: list[str] = []
    for item in items:
        job = jobs.get(item.job_id) if item.job_id else None
        if item.error is not None:
            errors.append(_failed(item, item.error))
        elif job is not None and job.status is JobStatus.SUCCEEDED and job.result is not None:
            fmt, logprobs = item.response_format, job.options.logprobs
            body = render(job.result, fmt, words=item.words, cues=item.cues, logprobs=logprobs)
            output.append(_line(item, {"status_code": 200, "request_id": job.id, "body": body}))
        elif job is not None and job.status is JobStatus.FAILED and job.error is not None:
            errors.append(_failed(item, job.error))
        else:
            message = "the batch ended before this request was processed"
            error = {"code": unfinished_code, "message": message}
            errors.append(_line(item, None, error))
    return output, errors


def write_lines(path: Path, lines: Sequence[str]) -> int:
    """Write atomically (temp file, fsync, rename); returns the size in bytes."""
    data = "".join(f"{line}\n" for line in lines).encode()
    temp = path.with_suffix(".tmp")
    with temp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    temp.replace(path)
    return len(data)


def _failed(item: BatchItem, error: JobError) -> str:
    body = error_body(error.status, error.message, param="file", code=error.code)
    return _line(item, {"status_code": error.status, "request_id": item.job_id, "body": body})


def _line(
    item: BatchItem, response: dict[str, Any] | None, error: dict[str, Any] | None = None
) -> str:
    key = item.job_id or item.batch_id  # requests rejected at validation have no job
    entry = {
        "id": f"batch_req_{key.split('_', 1)[1].split('_')[0]}_{item.line}",
        "custom_id": item.custom_id,
        "response": response,
        "error": error,
    }
    return json.dumps(entry, ensure_ascii=False)
