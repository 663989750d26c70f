"""Audio errors carry the HTTP status a caller should see."""

from __future__ import annotations


class AudioError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def undecodable(detail: str) -> AudioError:
    return AudioError(415, "unsupported_audio", f"the file is not decodable audio: {detail}")


def too_long(seconds: float | None, limit: float) -> AudioError:
    length = "longer than" if seconds is None else f"{seconds:.0f} s long;"
    return AudioError(413, "audio_too_long", f"audio is {length} the limit of {limit:.0f} s")


def describe(exc: Exception) -> str:
    """An FFmpeg error without the server-side file path it mentions."""
    return getattr(exc, "strerror", None) or type(exc).__name__


def empty_audio() -> AudioError:
    return AudioError(400, "empty_audio", "the file contains no audio samples")
