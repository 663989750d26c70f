"""The core's errors: what went wrong, in words a client can act on, without HTTP.

Each exception names its :class:`ErrorKind` (what sort of failure it is) and an OpenAI-style
machine ``code`` ("queue_full"). Only the HTTP edge (:mod:`asrserve.api.errors`) turns them into
responses; :data:`STATUS_OF_KIND` is the one place a kind becomes a status, because a failed job
stores that status too (a synchronous caller receives it later, from the job). The HTTP edge
raises the same classes for what it refuses itself, so no module writes a status.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class ErrorKind(StrEnum):
    INVALID_REQUEST = "invalid_request"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    REQUEST_TIMEOUT = "request_timeout"
    CONFLICT = "conflict"
    GONE = "gone"
    TOO_LARGE = "too_large"
    UNSUPPORTED = "unsupported"
    MISDIRECTED = "misdirected"
    UNPROCESSABLE = "unprocessable"
    RATE_LIMITED = "rate_limited"
    CLIENT_CLOSED = "client_closed"
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    STORAGE_FULL = "storage_full"


STATUS_OF_KIND: dict[ErrorKind, int] = {
    ErrorKind.INVALID_REQUEST: 400,
    ErrorKind.UNAUTHENTICATED: 401,
    ErrorKind.FORBIDDEN: 403,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.REQUEST_TIMEOUT: 408,
    ErrorKind.CONFLICT: 409,
    ErrorKind.GONE: 410,
    ErrorKind.TOO_LARGE: 413,
    ErrorKind.UNSUPPORTED: 415,
    ErrorKind.MISDIRECTED: 421,
    ErrorKind.UNPROCESSABLE: 422,
    ErrorKind.RATE_LIMITED: 429,
    ErrorKind.CLIENT_CLOSED: 499,
    ErrorKind.INTERNAL: 500,
    ErrorKind.UNAVAILABLE: 503,
    ErrorKind.TIMEOUT: 504,
    ErrorKind.STORAGE_FULL: 507,
}
"""The one table of statuses: the HTTP edge replies with a kind's status, a failed job
stores it (a synchronous caller receives it later, from the job)."""

KIND_OF_STATUS = {status: kind for kind, status in STATUS_OF_KIND.items()}

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
    (the class's ``default_code`` unless given), ``param`` naming the request field at fault,
    ``retry_after`` the seconds after which the same request may succeed."""

    kind: ErrorKind = ErrorKind.INTERNAL
    default_code: ClassVar[str | None] = None

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.param = param
        self.retry_after = retry_after

    @property
    def status(self) -> int:
        return STATUS_OF_KIND[self.kind]

    def body(self) -> dict[str, Any]:
        """The error in OpenAI's shape (see :func:`error_body`)."""
        return error_body(self.status, self.message, param=self.param, code=self.code)


class InvalidRequest(AsrError):
    """An option or value of the request cannot be used."""

    kind = ErrorKind.INVALID_REQUEST


class Unauthenticated(AsrError):
    """No valid API key came with the request."""

    kind = ErrorKind.UNAUTHENTICATED
    default_code = "invalid_api_key"


class Forbidden(AsrError):
    """The caller is known but may not do this."""

    kind = ErrorKind.FORBIDDEN


class NotFound(AsrError):
    """No such thing, or none the caller may see (each key sees only its own)."""

    kind = ErrorKind.NOT_FOUND


class RequestTimeout(AsrError):
    """The client did not send its request in time."""

    kind = ErrorKind.REQUEST_TIMEOUT


class Conflict(AsrError):
    """Not in the state this needs (a job not finished yet, a batch past cancelling)."""

    kind = ErrorKind.CONFLICT


class TooLarge(AsrError):
    kind = ErrorKind.TOO_LARGE


class Misdirected(AsrError):
    """The request named a host or origin this server does not answer for."""

    kind = ErrorKind.MISDIRECTED


class Unprocessable(AsrError):
    """A request field failed its schema's validation."""

    kind = ErrorKind.UNPROCESSABLE


class RateLimited(AsrError):
    """Not now: in ``retry_after`` seconds the same request may be accepted."""

    kind = ErrorKind.RATE_LIMITED

    def __init__(
        self, message: str, *, retry_after: int, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message, code=code, param=param, retry_after=retry_after)
        self.retry_after: int = retry_after


class QueueFull(RateLimited):
    """Admission: the priority class already holds as much unfinished work as it may."""

    default_code = "queue_full"


class QuotaExceeded(RateLimited):
    """The owner's daily audio quota does not hold this much more audio today."""

    default_code = "quota_exceeded"


class ClientClosed(AsrError):
    """The client went away before its answer; nobody reads this one."""

    kind = ErrorKind.CLIENT_CLOSED
    default_code = "client_closed_request"


class InternalError(AsrError):
    """The server failed at its own work; the message names what, never a traceback."""

    kind = ErrorKind.INTERNAL
    default_code = "internal_error"


class Unavailable(AsrError):
    """A part of the service cannot do its share right now; retry later."""

    kind = ErrorKind.UNAVAILABLE


class ModelLoading(Unavailable):
    """The model is not loaded yet; the server answers once it is."""

    def __init__(self) -> None:
        super().__init__("the model is still loading", retry_after=5)


class AudioMissing(AsrError):
    """A job's stored audio is gone (a Redis blob expired or was deleted)."""

    kind = ErrorKind.GONE
    default_code = "audio_missing"


class StoreUnavailable(Unavailable):
    """A store (the SQLite file, Redis) failed; the backend translated its driver's error
    into this at its boundary, so that no caller has to know which driver it was."""


class StorageFull(StoreUnavailable):
    """The disk under a store or the data dir is full, or has no room beyond its reserve
    (``drivers/disk.py``): for an upload, a store's write or a job's decoded audio."""

    kind = ErrorKind.STORAGE_FULL
    default_code = "insufficient_storage"


class Timeout(AsrError):
    """The work did not finish within its time."""

    kind = ErrorKind.TIMEOUT


class DeadlineExceeded(Timeout):
    """The request's deadline passed before its answer was ready."""

    default_code = "deadline_exceeded"


class StoredError(AsrError):
    """A failure recorded earlier (a failed job's error), told again with the status it was
    stored with."""

    def __init__(self, status: int, message: str, *, code: str, param: str | None = None) -> None:
        super().__init__(message, code=code, param=param)
        self.kind = KIND_OF_STATUS.get(status, ErrorKind.INTERNAL)


SHOWN_CHARS = 64


def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """A client's value as an error message may echo it: at most ``limit`` characters
    (then "…"), so that no error repeats unbounded input."""
    return value if len(value) <= limit else f"{value[:limit]}…"
