"""Validating a batch's JSONL input: every line, with line-numbered errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asrserve.api.errors import ApiError
from asrserve.api.forms import ModelInfo, parse_request
from asrserve.api.forms import Request as TranscriptionRequest
from asrserve.batches.models import ENDPOINT, BatchErrorLine

MAX_ERRORS = 100
MAX_CUSTOM_ID = 512
BODY_FIELDS = frozenset(
    {
        "file",
        "model",
        "language",
        "prompt",
        "response_format",
        "temperature",
        "timestamp_granularities",
        "timestamp_granularities[]",
        "beam_size",
    }
)


@dataclass(frozen=True)
class RequestLine:
    line: int  # 1-based
    custom_id: str
    file_id: str
    request: TranscriptionRequest


class InvalidInput(Exception):
    def __init__(self, errors: list[BatchErrorLine]) -> None:
        super().__init__(f"{len(errors)} invalid line(s)")
        self.errors = errors


def parse_input(data: bytes, model: ModelInfo, max_requests: int) -> list[RequestLine]:
    """Every request of the file, or :class:`InvalidInput` listing what is wrong (by line)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput([_error("invalid_encoding", f"not UTF-8: {exc.reason}")]) from exc
    requests, errors = _parse_lines(text, model)
    if not errors and not requests:
        errors.append(_error("empty_file", "the input file has no requests"))
    if len(requests) > max_requests:
        message = f"the batch has {len(requests)} requests; at most {max_requests} are allowed"
        errors.append(_error("too_many_requests", message))
    if errors:
        raise InvalidInput(errors)
    return requests


def _parse_lines(text: str, model: ModelInfo) -> tuple[list[RequestLine], list[BatchErrorLine]]:
    requests: list[RequestLine] = []
    errors: list[BatchErrorLine] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            request = _parse_line(raw, number, model)
        except _LineError as exc:
            errors.append(exc.error)
        else:
            first = seen.setdefault(request.custom_id, number)
            if first != number:
                message = f"custom_id '{request.custom_id}' is also used on line {first}"
                errors.append(_error("duplicate_custom_id", message, "custom_id", number))
            requests.append(request)
        if len(errors) >= MAX_ERRORS:
            break
    return requests, errors


class _LineError(Exception):
    def __init__(self, error: BatchErrorLine) -> None:
        super().__init__(error.message)
        self.error = error


def _parse_line(raw: str, line: int, model: ModelInfo) -> RequestLine:
    def fail(code: str, message: str, param: str | None = None) -> _LineError:
        return _LineError(_error(code, message, param, line))

    try:
        entry = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise fail("invalid_json", f"not valid JSON: {exc.msg}") from None
    if not isinstance(entry, dict):
        raise fail("invalid_request", "each line must be a JSON object")
    custom_id = _check_envelope(entry, fail)
    body = entry.get("body")
    file_id = _check_body(body, fail)
    assert isinstance(body, dict)
    try:
        request = parse_request(_fields(body), model)
    except ApiError as exc:
        param = f"body.{exc.param}" if exc.param else "body"
        raise fail(exc.code or "invalid_body", exc.message, param) from None
    return RequestLine(line, custom_id, file_id, request)


def _check_envelope(entry: dict[str, Any], fail: Callable[..., _LineError]) -> str:
    """The custom id of a line whose fields around the body are right."""
    custom_id = entry.get("custom_id")
    if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= MAX_CUSTOM_ID:
        raise fail(
            "invalid_custom_id", "custom_id must be a string of 1–512 characters", "custom_id"
        )
    if entry.get("method") != "POST":
        raise fail("invalid_method", "method must be 'POST'", "method")
    if entry.get("url") != ENDPOINT:
        raise fail("invalid_url", f"url must be '{ENDPOINT}'", "url")
    return custom_id


def _check_body(body: object, fail: Callable[..., _LineError]) -> str:
    """The audio file id of a well-formed body."""
    if not isinstance(body, dict):
        raise fail("invalid_body", "body must be a JSON object", "body")
    unknown = sorted(set(body) - BODY_FIELDS)
    if unknown:
        raise fail("invalid_body", f"unknown body field(s): {', '.join(unknown)}", "body")
    file_id = body.get("file")
    if not isinstance(file_id, str) or not file_id:
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
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _error(
    code: str, message: str, param: str | None = None, line: int | None = None
) -> BatchErrorLine:
    return BatchErrorLine(code=code, message=message, param=param, line=line)
