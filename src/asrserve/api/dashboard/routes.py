"""The dashboard: ``GET /`` (the page), its static assets, and ``GET /v1/dashboard/stats``.

The page is hand-written HTML, JS and CSS shipped in ``static/`` (no framework, nothing
fetched at run time). It polls the stats endpoint about once a second and derives rates
(audio seconds per second, device busy share) from the deltas of the scheduler's
cumulative counters between two polls, using the server's monotonic clock.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse

from asrserve.api.deps import ApiContext, context
from asrserve.api.schemas import job_view
from asrserve.errors import NotFound
from asrserve.jobs.models import Job, JobStatus

router = APIRouter()
Ctx = Annotated[ApiContext, Depends(context)]

STATIC_DIR = Path(__file__).resolve().parent / "static"
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
NO_CACHE = {"Cache-Control": "no-cache"}
LATENCY_WINDOW = 200  # recent jobs the latency percentiles are taken over
RECENT_JOBS = 15  # rows of the jobs table
PREVIEW_CHARS = 120


@router.get("/", include_in_schema=False)
async def index() -> FileResponse:
    """The live dashboard: audio seconds per second, device busy % over time, batch sizes,
    queue depth by priority, latency percentiles, recent jobs, and a "try it" upload form
    (hand-written, shipped in the package, nothing from a CDN; fed by
    ``GET /v1/dashboard/stats``)."""
    return FileResponse(
        STATIC_DIR / "index.html", media_type="text/html; charset=utf-8", headers=NO_CACHE
    )


@router.get("/dashboard/static/{name}", include_in_schema=False)
async def asset(name: str) -> FileResponse:
    media_type = ASSETS.get(name)
    if media_type is None:  # a fixed list: no path ever reaches the file system unchecked
        raise NotFound(f"no dashboard asset '{name}'", param="name", code="not_found")
    return FileResponse(STATIC_DIR / name, media_type=media_type, headers=NO_CACHE)


@router.get(
    "/v1/dashboard/stats",
    response_description="`now` (the monotonic clock, s), `time` (Unix time), `ready`, `model` "
    "(the default model's id), `scheduler` (as `GET /v1/scheduler` shows it), `latency` "
    f"(`count`, `window`, `p50`, `p95`, `p99` in s: the succeeded among the {LATENCY_WINDOW} "
    f"newest jobs) and `jobs` (the {RECENT_JOBS} newest, each without `options`, a `text` of "
    f"at most {PREVIEW_CHARS} characters instead of `result`, and `latency_s`).",
)
async def stats(ctx: Ctx) -> dict[str, Any]:
    """Scheduler counters, recent jobs and latency percentiles, for the dashboard to poll.

    ``now`` is the server's monotonic clock (seconds), so that rates between two polls
    are computed over server time, not over the browser's timer jitter.
    """
    jobs = await ctx.service.jobs(None, limit=LATENCY_WINDOW)  # an admin's view: every key's
    return {
        "now": time.monotonic(),
        "time": time.time(),
        "ready": ctx.ready,
        "model": ctx.catalog.default.id if ctx.catalog is not None else None,
        "scheduler": await ctx.scheduler_view(),
        "latency": latency_summary(jobs),
        "jobs": [job_row(job) for job in jobs[:RECENT_JOBS]],
    }


def job_row(job: Job) -> dict[str, Any]:
    """``job_view`` without the full result: a text preview instead, and the latency."""
    row = job_view(job)
    result = row.pop("result")
    row.pop("options", None)
    text = str(result.get("text", "")) if isinstance(result, dict) else ""
    row["text"] = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    row["latency_s"] = _latency(job)
    return row


def latency_summary(jobs: Sequence[Job]) -> dict[str, Any]:
    """p50/p95/p99 of ``finished_at - created_at`` over the succeeded jobs among ``jobs``."""
    done = (_latency(job) for job in jobs if job.status is JobStatus.SUCCEEDED)
    values = sorted(v for v in done if v is not None)
    return {
        "count": len(values),
        "window": len(jobs),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
    }


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """numpy's linear interpolation between closest ranks; None when empty."""
    if not ordered:
        return None
    return round(float(np.percentile(ordered, q)), 4)


def _latency(job: Job) -> float | None:
    if job.finished_at is None:
        return None
    return max(job.finished_at - job.created_at, 0.0)
