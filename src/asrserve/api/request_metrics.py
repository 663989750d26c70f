"""The HTTP middleware that counts every request, by route template, method and status."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import Request, Response

from asrserve.metrics import Metrics

Middleware = Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]


def request_metrics(metrics: Metrics) -> Middleware:
    async def middleware(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        start = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        metrics.observe_request(
            route, request.method, response.status_code, time.perf_counter() - start
        )
        return response

    return middleware
