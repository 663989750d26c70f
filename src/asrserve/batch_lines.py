"""Validating a batch's JSONL input: every line, with line-numbered errors.

The file is streamed, never read whole: lines are split on ``b"\\n"`` only (as JSONL defines
them: a ``\\r``, ``\\x1e`` or U+2028 inside a line belongs to it; ``json.loads`` takes a
``\\r`` between tokens as whitespace). It is read in blocks; a run of blank lines is skipped
at the speed of a regular-expression search (a file of 100 MiB of newlines is not 100 M
reads), and a line over the per-line limit is skipped in blocks (``line_too_long``), so
memory stays bounded by that limit, whatever the file's size. The same iterator counts the
requests when a file is uploaded and yields them for parsing, so the two counts never
differ.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from asrserve.batch_api.models import ENDPOINT, ENDPOINTS, BatchErrorLine
from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest, shown
from asrserve.languages import ANY_LANGUAGE, LanguageRule
from asrserve.request_schema import DIARIZATION, RequestForm
from asrserve.requests import TranscriptionRequest, lone_surrogate, parse_request

MAX_ERRORS = 100
MAX_CUSTOM_ID = 512
MAX_FILE_ID = 64  # ids are "file-" and 28 hex digits
BLOCK_BYTES = 64 * 1024  # what is read at a time
_CONTENT = re.compile(rb"[^ \t\n\r\f\v]")  # a byte that makes a line not blank
# a line's body: the request schema's fields, but a synchronous or an async request's own
ONLINE = frozenset({"stream", "deadline_s", "callback_url"})
BODY_FIELDS = frozenset({"file", *RequestForm.names(leave_out=ONLINE | DIARIZATION)})


@dataclass(frozen=True)
class RequestLine:
    line: int  # 1-based
    custom_id: str
    file_id: str
    request: TranscriptionRequest


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, counting every b"\n"-ended line, blank ones too
    data: bytes | None  # from its first non-blank byte; None: longer than the limit (skipped)


class InvalidInput(Exception):
    def __init__(self, errors: list[BatchErrorLine]) -> None:
        super().__init__(f"{len(errors)} invalid line(s)")
        self.errors = errors


def jsonl_lines(source: BinaryIO, max_line_bytes: int) -> Iterator[Line]:
    """The non-blank lines of a JSONL stream, each at most ``max_line_bytes`` long (its
    ``\\n`` aside; longer ones come as ``Line(number, None)``)."""
    return _Lines(source, max_line_bytes).lines()


def count_requests(source: BinaryIO, max_line_bytes: int, limit: int) -> int:
    """The requests (non-blank lines) :func:`parse_input` will find, counted up to
    ``limit + 1``: past the limit the file is refused whatever its count."""
    count = 0
    for _ in jsonl_lines(source, max_line_bytes):
        count += 1
        if count > limit:
            break
    return count


class _Lines:
    """A block reader over ``source``: ``buffer[pos:]`` is not yet read as lines, ``pos``
    is on line ``number``, after ``indent`` blank bytes of that line (counted for its
    length, not kept: a line's data starts at its first non-blank byte)."""

    def __init__(self, source: BinaryIO, max_line_bytes: int) -> None:
        self._source = source
        self._limit = max_line_bytes
        self._buffer = b""
        self._pos = 0
        self._number = 1
        self._indent = 0
        self._eof = False

    def _read(self) -> bytes:
        block = b"" if self._eof else self._source.read(BLOCK_BYTES)
        self._eof = not block
        return block

    def lines(self) -> Iterator[Line]:
        while True:
            found = _CONTENT.search(self._buffer, self._pos)
            if found is None:
                if not self._drop_blank():
                    return
                continue
            first = found.start()
            head = self._buffer.rfind(b"\n", self._pos, first)
            if head >= 0:
                self._number += self._buffer.count(b"\n", self._pos, head + 1)
                self._indent = first - head - 1
            else:
                self._indent += first - self._pos
            self._pos = first
            yield self._line()
            if self._pos < 0:  # the stream ended inside that line
                return

    def _drop_blank(self) -> bool:
        """Skip the blank rest of the buffer and read the next block; False at the end."""
        tail = self._buffer[self._pos :]
        newlines = tail.count(b"\n")
        self._number += newlines
        self._indent = len(tail) - tail.rfind(b"\n") - 1 if newlines else self._indent + len(tail)
        self._buffer, self._pos = self._read(), 0
        return bool(self._buffer)

    def _line(self) -> Line:
        """The line starting at ``pos``; ``pos`` moves past its ``\\n`` (-1: none)."""
        start, number = self._pos, self._number
        end = self._buffer.find(b"\n", start)
        while end < 0 and self._indent + len(self._buffer) - start <= self._limit:
            block = self._read()
            if not block:
                break
            self._buffer, start = self._buffer[start:] + block, 0
            end = self._buffer.find(b"\n")
        stop = len(self._buffer) if end < 0 else end
        fits = self._indent + stop - start <= self._limit
        data = self._buffer[start:stop] if fits else None
        self._number, self._indent = number + 1, 0
        if end >= 0:
            self._pos = end + 1
        elif not fits:
            self._skip_rest()
        else:
            self._pos = -1
        return Line(number, data)

    def _skip_rest(self) -> None:
        """Read past the rest of an overlong line (never held whole)."""
        while block := self._read():
            end = block.find(b"\n")
            if end >= 0:
                self._buffer, self._pos = block, end + 1
                return
        self._buffer, self._pos = b"", -1


def parse_input(
    source: BinaryIO,
    catalog: Catalog,
    max_requests: int,
    max_line_bytes: int,
    endpoint: str = ENDPOINT,
    languages: LanguageRule = ANY_LANGUAGE,
) -> list[RequestLine]:
    """Every request of the file, or :class:`InvalidInput` listing what is wrong (by line).
    Each line's ``url`` must be the batch's ``endpoint``, which says the lines' task; its
    ``language`` must be one the ``languages`` of the batch's owner's key allow."""
    lines = jsonl_lines(source, max_line_bytes)
    rules = _Rules(catalog, endpoint, max_line_bytes, languages)
    requests, errors = _parse_lines(lines, rules, max_requests)
    if not errors and not requests:
        errors.append(_error("empty_file", "the input file has no requests"))
    if errors:
        raise InvalidInput(errors)
    return requests


@dataclass(frozen=True)
class _Rules:
    """What every line of one batch is checked against."""

    catalog: Catalog
    endpoint: str
    max_line_bytes: int
    languages: LanguageRule = ANY_LANGUAGE


def _parse_lines(
    lines: Iterable[Line], rules: _Rules, max_requests: int
) -> tuple[list[RequestLine], list[BatchErrorLine]]:
    requests: list[RequestLine] = []
    errors: list[BatchErrorLine] = []
    seen: dict[str, int] = {}
    for count, line in enumerate(lines, start=1):
        if count > max_requests:
            message = f"the batch has more than {max_requests} requests, the most allowed"
            errors.insert(0, _error("too_many_requests", message))
            break
        try:
            request = _parse_line(line, rules)
        except _LineError as exc:
            errors.append(exc.error)
        else:
            first = seen.setdefault(request.custom_id, line.number)
            if first != line.number:
                message = f"custom_id '{shown(request.custom_id)}' is also used on line {first}"
                errors.append(_error("duplicate_custom_id", message, "custom_id", line.number))
            requests.append(request)
        if len(errors) >= MAX_ERRORS:
            break
    return requests, errors


class _LineError(Exception):
    def __init__(self, error: BatchErrorLine) -> None:
        super().__init__(error.message)
        self.error = error


def _parse_line(raw: Line, rules: _Rules) -> RequestLine:
    line = raw.number

    def fail(code: str, message: str, param: str | None = None) -> _LineError:
        return _LineError(_error(code, message, param, line))

    entry = _decode(raw, rules.max_line_bytes, fail)
    if not isinstance(entry, dict):
        raise fail("invalid_request", "each line must be a JSON object")
    custom_id = _check_envelope(entry, rules.endpoint, fail)
    body = entry.get("body")
    file_id = _check_body(body, fail)
    assert isinstance(body, dict)
    try:
        task = ENDPOINTS[rules.endpoint]
        request = parse_request(_fields(body), rules.catalog, task=task, languages=rules.languages)
    except InvalidRequest as exc:
        param = f"body.{exc.param}" if exc.param else "body"
        raise fail(exc.code or "invalid_body", exc.message, param) from None
    return RequestLine(line, custom_id, file_id, request)


def _decode(raw: Line, max_line_bytes: int, fail: Callable[..., _LineError]) -> object:
    """The line's JSON value: UTF-8, at most ``max_line_bytes``, JSON of a sane depth."""
    if raw.data is None:
        raise fail("line_too_long", f"the line is longer than {max_line_bytes} bytes")
    try:
        text = raw.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail("invalid_encoding", f"not UTF-8: {exc.reason}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail("invalid_json", f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise fail("invalid_json", "not valid JSON: nested too deeply") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise fail("invalid_json", f"not a usable JSON value: {exc}") from None
    where = lone_surrogate(value)
    if where is not None:
        message = "a string holds a lone surrogate (an unpaired \\ud800-\\udfff escape)"
        raise fail("invalid_encoding", message, where or None)
    return value


def _check_envelope(entry: dict[str, Any], endpoint: str, fail: Callable[..., _LineError]) -> str:
    """The custom id of a line whose fields around the body are right."""
    custom_id = entry.get("custom_id")
    if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= MAX_CUSTOM_ID:
        raise fail(
            "invalid_custom_id", "custom_id must be a string of 1–512 characters", "custom_id"
        )
    if entry.get("method") != "POST":
        raise fail("invalid_method", "method must be 'POST'", "method")
    if entry.get("url") != endpoint:
        raise fail("invalid_url", f"url must be '{endpoint}', the batch's endpoint", "url")
    return custom_id


def _check_body(body: object, fail: Callable[..., _LineError]) -> str:
    """The audio file id of a well-formed body."""
    if not isinstance(body, dict):
        raise fail("invalid_body", "body must be a JSON object", "body")
    unknown = sorted(set(body) - BODY_FIELDS)
    if unknown:
        names = shown(", ".join(unknown))
        raise fail("invalid_body", f"unknown body field(s): {names}", "body")
    file_id = body.get("file")
    if not isinstance(file_id, str) or not 1 <= len(file_id) <= MAX_FILE_ID:
        raise fail(
            "invalid_body", "body.file must be the id of an uploaded audio file", "body.file"
        )
    return file_id


def _fields(body: dict[str, Any]) -> dict[str, list[str]]:
    """A JSON body as form fields: each name to its values, as strings."""
    fields: dict[str, list[str]] = {}
    for name, value in body.items():
        if name == "file" or value is None:
            continue
        values = value if isinstance(value, list) else [value]
        fields[name] = [_text(v) for v in values]
    return fields


def _text(value: object) -> str:
    if isinstance(value, dict):  # an object field (chunking_strategy) as the form's JSON
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _error(
    code: str, message: str, param: str | None = None, line: int | None = None
) -> BatchErrorLine:
    return BatchErrorLine(code=code, message=message, param=param, line=line)
