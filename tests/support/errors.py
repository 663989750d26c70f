"""The OpenAI error shape every refusal must have."""

from __future__ import annotations

from typing import Any

import httpx

UNSET: Any = object()


def assert_error(
    resp: httpx.Response,
    status: int,
    *,
    code: str | None = UNSET,
    param: str | None = UNSET,
    kind: str = "invalid_request_error",
) -> dict[str, Any]:
    """An OpenAI-shaped JSON error with this status, type (``kind``) and, when given, this
    code and param; the error object is returned for more checks."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert error["type"] == kind, error
    if code is not UNSET:
        assert error["code"] == code, error
    if param is not UNSET:
        assert error["param"] == param, error
    return error
