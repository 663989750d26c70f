"""Errors as HTTP responses in OpenAI's shape: ``{"error": {"message", "type", "param",
"code"}}``.

The core raises :class:`asrserve.errors.AsrError`; this module alone turns one into a
response, with the status its kind answers with (:data:`asrserve.errors.STATUS_OF_KIND`) and
``Retry-After`` where it says when to come back. :class:`ApiError` is for what the HTTP edge
itself refuses (the model still loading, a missing form part, an unknown id).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from asrserve.backends.redis import REDIS_ERRORS, RETRY_AFTER_S
from asrserve.errors import STATUS_OF_KIND, AsrError, RateLimited, error_body, shown

log = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, param=self.param, code=self.code)


def as_api_error(exc: AsrError) -> ApiError:
    """The response a core error answers with."""
    headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, RateLimited) else None
    return ApiError(
        STATUS_OF_KIND[exc.kind], exc.message, param=exc.param, code=exc.code, headers=headers
    )


def database_error(exc: sqlite3.OperationalError) -> ApiError:
    """What a client is told when the database cannot do its part: ``507`` when the disk is
    full, ``503`` otherwise (read-only, I/O error, locked); both worth a retry later."""
    code = getattr(exc, "sqlite_errorcode", None)
    if (code is not None and code & 0xFF == sqlite3.SQLITE_FULL) or "disk is full" in str(exc):
        return ApiError(
            507,
            "the server's storage is full, so the request could not be recorded; retry later",
            code="insufficient_storage",
            headers={"Retry-After": "60"},
        )
    return ApiError(
        503,
        "the server's database is unavailable right now; retry later",
        code="storage_unavailable",
        headers={"Retry-After": "10"},
    )


def broker_unavailable() -> ApiError:
    """Redis (the distributed mode's store and queue) cannot be reached: nothing was accepted."""
    return ApiError(
        503,
        "the service's queue (Redis) is unreachable; nothing was accepted, retry later",
        code="broker_unavailable",
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


def install_error_handlers(app: FastAPI) -> None:
    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return JSONResponse(
            error_body(exc.status_code, str(exc.detail)),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        param = shown(".".join(str(p) for p in first.get("loc", ())[1:])) or None
        message = f"{param}: {first.get('msg', 'invalid value')}" if param else "invalid request"
        return JSONResponse(error_body(422, message, param=param), status_code=422)

    async def sqlite_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, sqlite3.OperationalError)
        log.error("database error on %s %s: %s", request.method, request.url.path, exc)
        return await api_error(request, database_error(exc))

    async def broker_error(request: Request, exc: Exception) -> JSONResponse:
        log.error("redis unreachable on %s %s: %s", request.method, request.url.path, exc)
        return await api_error(request, broker_unavailable())

    async def asr_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, AsrError)
        return await api_error(request, as_api_error(exc))

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(AsrError, asr_error)
    app.add_exception_handler(sqlite3.OperationalError, sqlite_error)
    for redis_error in REDIS_ERRORS:
        app.add_exception_handler(redis_error, broker_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
