"""What the groups share: sizes, the flag marker, and parsers of comma-separated values."""

from __future__ import annotations

from enum import StrEnum

from pydantic.config import JsonDict

MIB = 1024 * 1024
ENV_PREFIX = "ASRSERVE_"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})

FLAG: JsonDict = {
    "flag": True
}  # json_schema_extra of a field that `asrserve serve` takes as a flag


class EncoderWindow(StrEnum):
    ADAPTIVE = "adaptive"  # pad each chunk to the smallest window bucket that holds it
    FULL = "full"  # Whisper's standard 30 s window for every chunk


class AuthMode(StrEnum):
    AUTO = "auto"  # on, unless the server binds only to loopback
    ON = "on"
    OFF = "off"


def numbers(value: object) -> object:
    """``"5,10,30"`` (an environment variable, a flag) as a tuple of numbers."""
    if isinstance(value, str):
        return tuple(float(part) for part in value.split(",") if part.strip())
    if isinstance(value, int | float):
        return (value,)
    return value


def names(value: object) -> object:
    """``"a, b"`` as a tuple of names."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value
