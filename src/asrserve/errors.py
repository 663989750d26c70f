"""The core's errors: what went wrong, in words a client can act on, without HTTP.

Each exception names its :class:`ErrorKind` (what sort of failure it is) and an OpenAI-style
machine ``code`` ("queue_full"). Only the HTTP edge (:mod:`asrserve.api.errors`) turns them into
responses; :data:`STATUS_OF_KIND` is the one place a kind becomes a status, because a failed job
stores that status too (a synchronous caller receives it later, from the job).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class ErrorKind(StrEnum):
    INVALID_REQUEST = "invalid_request"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    GONE = "gone"
    TOO_LARGE = "too_large"
    UNSUPPORTED = "unsupported"
    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"


STATUS_OF_KIND: dict[ErrorKind, int] = {
    ErrorKind.INVALID_REQUEST: 400,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.CONFLICT: 409,
    ErrorKind.GONE: 410,
    ErrorKind.TOO_LARGE: 413,
    ErrorKind.UNSUPPORTED: 415,
    ErrorKind.RATE_LIMITED: 429,
    ErrorKind.INTERNAL: 500,
    ErrorKind.UNAVAILABLE: 503,
    ErrorKind.TIMEOUT: 504,
}
"""The status a kind answers with: the HTTP edge replies with it, a failed job stores it."""

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
"""OpenAI's error ``type`` for a status (others: ``server_error`` from 500 up, else
``invalid_request_error``)."""


def error_body(
    status: int, message: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """An error in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``: what
    an HTTP response carries, and a Batch API error line for a failed request."""
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class AsrError(Exception):
    """A failure the caller is told about: ``message`` for people, ``code`` for programs
    (the class's ``default_code`` unless given), ``param`` naming the request field at fault."""

    kind: ClassVar[ErrorKind] = ErrorKind.INTERNAL
    default_code: ClassVar[str | None] = None

    def __init__(self, message: str, *, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.param = param


class InvalidRequest(AsrError):
    """An option or value of the request cannot be used."""

    kind = ErrorKind.INVALID_REQUEST


class NotFound(AsrError):
    kind = ErrorKind.NOT_FOUND


class RateLimited(AsrError):
    """Not now: in ``retry_after`` seconds the same request may be accepted."""

    kind = ErrorKind.RATE_LIMITED

    def __init__(self, message: str, *, retry_after: int, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class QueueFull(RateLimited):
    """Admission: the priority class already holds as much unfinished work as it may."""

    default_code = "queue_full"


class QuotaExceeded(RateLimited):
    """The owner's daily audio quota does not hold this much more audio today."""

    default_code = "quota_exceeded"


SHOWN_CHARS = 64


def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """A client's value as an error message may echo it: at most ``limit`` characters
    (then "…"), so that no error repeats unbounded input."""
    return value if len(value) <= limit else f"{value[:limit]}…"
