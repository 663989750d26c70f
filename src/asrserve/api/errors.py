"""Errors as HTTP responses in OpenAI's shape: ``{"error": {"message", "type", "param",
"code"}}``.

The core and the HTTP edge alike raise :class:`asrserve.errors.AsrError`; this module alone
turns one into a response, with the status its kind answers with
(:data:`asrserve.errors.STATUS_OF_KIND`), ``Retry-After`` where it says when to come back,
and the headers its kind needs (a challenge for a missing key, a closed connection for a
stuck upload).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from asrserve.errors import AsrError, ErrorKind, StoreUnavailable, Unprocessable, error_body, shown

log = logging.getLogger(__name__)

HEADERS_OF_KIND = {
    ErrorKind.UNAUTHENTICATED: {"WWW-Authenticate": "Bearer"},
    # A client stuck mid-body: close the connection rather than wait for the rest.
    ErrorKind.REQUEST_TIMEOUT: {"Connection": "close"},
}


def error_response(exc: AsrError, headers: dict[str, str] | None = None) -> JSONResponse:
    """The response ``exc`` answers with (``headers`` added, such as a key's rate)."""
    sent = {**(headers or {}), **HEADERS_OF_KIND.get(exc.kind, {})}
    if exc.retry_after is not None:
        sent["Retry-After"] = str(exc.retry_after)
    return JSONResponse(exc.body(), status_code=exc.status, headers=sent or None)


def install_error_handlers(app: FastAPI) -> None:
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
        return error_response(Unprocessable(message, param=param))

    async def asr_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, AsrError)
        if isinstance(exc, StoreUnavailable):
            cause = exc.__cause__ or exc.message
            log.error("%s on %s %s: %s", exc.code, request.method, request.url.path, cause)
        return error_response(exc)

    app.add_exception_handler(AsrError, asr_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
