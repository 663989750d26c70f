"""Liveness, readiness and the scheduler's live view."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from asrserve.api.deps import ApiContext, context
from asrserve.errors import ModelLoading

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(ctx: ApiContext = Depends(context)) -> dict[str, str]:  # noqa: B008
    if not ctx.ready:
        raise ModelLoading()
    await ctx.broker_ping()  # BrokerUnavailable when Redis is unreachable
    return {"status": "ready"}


@router.get("/v1/scheduler")
async def scheduler(ctx: ApiContext = Depends(context)) -> dict[str, Any]:  # noqa: B008
    return await ctx.scheduler_view()


@router.get("/metrics", include_in_schema=False)
async def metrics(ctx: ApiContext = Depends(context)) -> Response:  # noqa: B008
    return Response(ctx.metrics.render(), media_type=CONTENT_TYPE_LATEST)
