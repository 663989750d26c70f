"""What can be wrong with a job's audio: one core error class each, its kind saying how a
caller is answered (see :mod:`asrserve.errors`)."""

from __future__ import annotations

from asrserve.errors import AsrError, ErrorKind


class AudioError(AsrError):
    """The audio cannot be transcribed (as it is, or at all)."""

    kind = ErrorKind.INVALID_REQUEST


class UnsupportedAudio(AudioError):
    """Not decodable: no audio stream, an unknown codec, a corrupt file."""

    kind = ErrorKind.UNSUPPORTED
    default_code = "unsupported_audio"


class AudioTooLong(AudioError):
    kind = ErrorKind.TOO_LARGE
    default_code = "audio_too_long"


class AudioMetadataTooLarge(AudioError):
    """Opening the file needs more memory than a probe may use (its index tables or tags
    are out of proportion: :mod:`asrserve.audio.probes`)."""

    kind = ErrorKind.TOO_LARGE
    default_code = "audio_metadata_too_large"


class EmptyAudio(AudioError):
    kind = ErrorKind.INVALID_REQUEST
    default_code = "empty_audio"


def undecodable(detail: str) -> AudioError:
    return UnsupportedAudio(f"the file is not decodable audio: {detail}")


def too_long(seconds: float | None, limit: float) -> AudioError:
    length = "longer than" if seconds is None else f"{seconds:.0f} s long;"
    return AudioTooLong(f"audio is {length} the limit of {limit:.0f} s")


def describe(exc: Exception) -> str:
    """An FFmpeg error without the server-side file path it mentions."""
    return getattr(exc, "strerror", None) or type(exc).__name__


def empty_audio() -> AudioError:
    return EmptyAudio("the file contains no audio samples")
