"""What goes wrong in a live session: core errors (:class:`AsrError`), which the WebSocket
edge sends as ``error`` events."""

from __future__ import annotations

from typing import Any

from asrserve.errors import AsrError, ErrorKind


class LiveError(AsrError):
    """A client's mistake. ``fatal``: the session ends after the error event (the client
    sends what cannot go on: garbage, audio faster than real time, a buffer never
    committed)."""

    kind = ErrorKind.INVALID_REQUEST

    def __init__(
        self, message: str, *, code: str, param: str | None = None, fatal: bool = False
    ) -> None:
        super().__init__(message, code=code, param=param)
        self.fatal = fatal


class LiveUnavailable(AsrError):
    """No live session can be opened here now (no model on this node, too many sessions)."""

    kind = ErrorKind.UNAVAILABLE


def error_event(exc: AsrError) -> dict[str, Any]:
    """A core error as a realtime ``error`` event, in OpenAI's error shape."""
    return {"type": "error", **exc.body()}
