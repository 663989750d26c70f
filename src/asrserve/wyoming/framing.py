"""Wyoming's framing read within bounds: a JSON header line, then optional extra data
(``data_length`` bytes of JSON) and a payload (``payload_length`` bytes).

The library's own reader answers garbage and a connection closed mid-event alike with
"no more events" and reads any ``payload_length`` a client claims; this one tells them
apart (:class:`BadEvent`, :class:`Truncated`) and refuses sizes over the limits before
reading them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from wyoming.event import Event

MAX_LINE_BYTES = 64 * 1024  # the header line (the StreamReader's limit)
MAX_DATA_BYTES = 64 * 1024  # extra JSON data after it
MAX_PAYLOAD_BYTES = 1024 * 1024  # one event's payload (an audio chunk is a few KiB)


class BadEvent(Exception):
    """What the client sent is not a Wyoming event within the limits."""

    def __init__(self, message: str, code: str = "bad_event") -> None:
        super().__init__(message)
        self.code = code


class Truncated(Exception):
    """The connection ended inside an event."""


async def read_event(reader: asyncio.StreamReader) -> Event | None:
    """The next event; None when the client has closed the connection between events."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise Truncated("the connection ended inside an event's header") from None
    except asyncio.LimitOverrunError:
        raise BadEvent(f"an event's header line is over {MAX_LINE_BYTES} bytes") from None
    header = _header(line)
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise BadEvent("an event's data is not a JSON object")
    data_length = _length(header, "data_length", MAX_DATA_BYTES)
    payload_length = _length(header, "payload_length", MAX_PAYLOAD_BYTES)
    try:
        if data_length:
            extra = _object(await reader.readexactly(data_length), "data")
            data = {**data, **extra}
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        raise Truncated("the connection ended inside an event's data or payload") from None
    return Event(type=header["type"], data=data, payload=payload)


def _header(line: bytes) -> dict[str, Any]:
    header = _object(line, "header")
    if not isinstance(header.get("type"), str) or not header["type"]:
        raise BadEvent("an event's header names no type")
    return header


def _object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise BadEvent(f"an event's {what} is not JSON") from None
    if not isinstance(value, dict):
        raise BadEvent(f"an event's {what} is not a JSON object")
    return value


def _length(header: dict[str, Any], name: str, limit: int) -> int:
    value = header.get(name)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadEvent(f"an event's {name} is not a byte count")
    if value > limit:
        raise BadEvent(f"an event's {name} is over {limit} bytes", code="event_too_large")
    return value
