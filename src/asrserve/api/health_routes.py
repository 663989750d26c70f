"""Liveness, readiness and the scheduler's live view."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from asrserve.api.deps import ApiContext, context
from asrserve.api.openapi import errors
from asrserve.errors import ModelLoading

router = APIRouter()


@router.get("/healthz", response_description='`{"status": "ok"}`.')
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_description='`{"status": "ready"}`.',
    responses=errors(s503="The model is still loading, or (distributed) Redis is unreachable."),
)
async def readyz(ctx: ApiContext = Depends(context)) -> dict[str, str]:  # noqa: B008
    """Readiness: the models are loaded (distributed: Redis is reachable)."""
    if not ctx.ready:
        raise ModelLoading()
    await ctx.broker_ping()  # BrokerUnavailable when Redis is unreachable
    return {"status": "ready"}


@router.get(
    "/v1/scheduler",
    response_description="The scheduler's settings and live counters (distributed: the worker "
    "nodes' reports merged), `workers` (the live nodes' latest reports), `mode`, `node`, "
    "`queue_depth` per priority and `admission` (the backlog per class).",
)
async def scheduler(ctx: ApiContext = Depends(context)) -> dict[str, Any]:  # noqa: B008
    """The scheduler settings in force, its live counters, queue depth and the admission
    backlog per class (distributed: every worker node's report). Admin keys, with auth on."""
    return await ctx.scheduler_view()


@router.get("/metrics", include_in_schema=False)
async def metrics(ctx: ApiContext = Depends(context)) -> Response:  # noqa: B008
    """Prometheus metrics: batch sizes, queue wait, compute, padding waste, queue depth by
    priority, device busy fraction, HTTP and job outcomes; on CUDA also GPU utilization and
    memory through NVML. Admin keys, with auth on."""
    return Response(ctx.metrics.render(), media_type=CONTENT_TYPE_LATEST)
