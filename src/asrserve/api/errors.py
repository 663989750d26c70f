"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from asrserve.distributed.connection import REDIS_ERRORS, RETRY_AFTER_S

log = logging.getLogger(__name__)

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable_error",
    504: "timeout_error",
}


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


SHOWN_CHARS = 64


def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """A client's value as an error message may echo it: at most ``limit`` characters
    (then "…"), so that no error repeats unbounded input."""
    return value if len(value) <= limit else f"{value[:limit]}…"


def error_body(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


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

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(sqlite3.OperationalError, sqlite_error)
    for redis_error in REDIS_ERRORS:
        app.add_exception_handler(redis_error, broker_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
