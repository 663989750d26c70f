"""A small limit on every request body the app reads whole (the JSON of ``POST /v1/batches``
today, and any route added later), enforced while reading.

A pure ASGI middleware hands the app a ``receive`` that counts the body's bytes: a declared
``Content-Length`` over ``max_json_body_bytes`` is refused before a byte is read, a body
without one as soon as it passes the limit; both are ``413 request_too_large``, and nothing
over the limit is ever held. The streaming multipart intake (:mod:`asrserve.api.uploads`)
lifts the limit with :func:`lift`: it enforces its own limits as the bytes arrive.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from asrserve.api.errors import error_response
from asrserve.errors import TooLarge

SCOPE_KEY = "asrserve.body_limit"


class BodyTooLarge(StarletteHTTPException):
    """Raised from ``receive``: an HTTPException, which FastAPI's body reading passes on
    (anything else it would turn into a 400)."""

    def __init__(self, limit: int) -> None:
        message = f"the request body exceeds the limit of {limit} bytes"
        self.error = TooLarge(message, code="request_too_large")
        super().__init__(self.error.status, message)


class _LimitedReceive:
    def __init__(self, receive: Receive, limit: int, declared: int | None) -> None:
        self._receive = receive
        self.limit = limit
        self.declared = declared
        self.received = 0
        self.lifted = False

    async def __call__(self) -> Message:
        if self.lifted:
            return await self._receive()
        if self.declared is not None and self.declared > self.limit:
            raise BodyTooLarge(self.limit)
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                raise BodyTooLarge(self.limit)
        return message


class BodyLimit:
    """The middleware: every HTTP request's body is read through the limit."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limited = _LimitedReceive(receive, self.max_bytes, _declared(scope))
        scope[SCOPE_KEY] = limited
        await self.app(scope, limited, send)


def lift(request: Request) -> None:
    """No limit on this request's body: for a reader that enforces its own while streaming."""
    limited = request.scope.get(SCOPE_KEY)
    if isinstance(limited, _LimitedReceive):
        limited.lifted = True


def install(app: FastAPI, max_bytes: int) -> None:
    """Add the limit; call before the middlewares that must run first (keys, metrics)."""

    async def too_large(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, BodyTooLarge)
        return error_response(exc.error)

    app.add_middleware(BodyLimit, max_bytes=max_bytes)
    app.add_exception_handler(BodyTooLarge, too_large)


def _declared(scope: Scope) -> int | None:
    declared = Headers(scope=scope).get("content-length")
    return int(declared) if declared is not None and declared.isdigit() else None
