"""The API reference as people read it, made from the app's OpenAPI schema so that a route is
described once, in its code: ``python -m asrserve.api.reference --write docs/api.md`` (``make
docs``); ``--check`` fails when the file is not what the schema makes now. Each route: its
description (the route's docstring), its parameters and form or body fields (type, default,
bounds, description), its responses and errors; then the routes outside the schema (the
WebSocket, the dashboard, the metrics) from their docstrings."""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, APIWebSocketRoute
from starlette.routing import BaseRoute

from asrserve.api.app import create_app
from asrserve.api.openapi import COMMON_ERRORS
from asrserve.settings import Settings

HEADER = """# API reference

Made from the app's OpenAPI schema by `python -m asrserve.api.reference --write docs/api.md`
(`make docs`); a test fails when this file differs from what the schema makes. Each route's
text is its docstring, each field's the request schema's (`src/asrserve/request_schema.py`).
Examples and the longer stories (streaming, subtitles, webhooks, the Batch API's files):
[calling.md](calling.md). The schema itself is served at `GET /openapi.json`, browsable at
`/docs` and `/redoc`; with auth on, any valid key is needed.

## Errors

Every error has OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, `param`
naming the field at fault and `code` the error for programs. Any route may also answer:

| Status | When |
|---|---|
"""
METHODS = ("get", "post", "put", "patch", "delete")


def schema() -> dict[str, Any]:
    """The OpenAPI schema of the app a server serves (its stores in a directory thrown away)."""
    return _app_and_schema()[1]


def _app_and_schema() -> tuple[FastAPI, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as data_dir:
        app = create_app(Settings(data_dir=Path(data_dir)))
        return app, app.openapi()


def markdown() -> str:
    """The reference: the common errors, then a section per route."""
    app, spec = _app_and_schema()
    parts = [HEADER + "\n".join(f"| {s} | {_cell(t)} |" for s, t in COMMON_ERRORS.items())]
    operations = [
        (method, path, op)
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        if method in METHODS
    ]
    parts.append("## Routes\n\n" + "\n".join(_toc_line(m, p) for m, p, _ in operations))
    parts += [_operation(method, path, op, spec) for method, path, op in operations]
    parts.append(_outside(app))
    return "\n\n".join(parts) + "\n"


def _toc_line(method: str, path: str) -> str:
    title = f"`{method.upper()} {path}`"
    return f"- [{title}](#{slug(title)})"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _operation(method: str, path: str, op: dict[str, Any], spec: dict[str, Any]) -> str:
    lines = [f"### `{method.upper()} {path}`", ""]
    if op.get("description"):
        lines += [_text(op["description"]), ""]
    params = op.get("parameters", [])
    if params:
        lines += ["**Parameters**", "", "| Name | In | Type | Default | Description |"]
        lines.append("|---|---|---|---|---|")
        for p in params:
            s = p.get("schema", {})
            row = [f"`{p['name']}`", p["in"], _type(s, spec), _default(s), p.get("description")]
            lines.append(_row(row))
        lines.append("")
    for media, content in op.get("requestBody", {}).get("content", {}).items():
        lines += _body(media, _resolved(content["schema"], spec), spec)
    lines += ["**Responses**", "", "| Status | Description |", "|---|---|"]
    for status, response in op["responses"].items():
        media = ", ".join(f"`{m}`" for m in response.get("content", {}))
        shown = f"{response['description']} ({media})" if status < "300" and media else None
        lines.append(_row([status, shown or response["description"]]))
    return "\n".join(lines)


def _body(media: str, body: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    required = set(body.get("required", []))
    lines = [f"**Body** (`{media}`)", "", "| Field | Type | Default | Description |"]
    lines.append("|---|---|---|---|")
    for name, field in body.get("properties", {}).items():
        shown = f"`{name}`" + (" (required)" if name in required else "")
        lines.append(_row([shown, _type(field, spec), _default(field), field.get("description")]))
    return [*lines, ""]


def _type(s: dict[str, Any], spec: dict[str, Any]) -> str:
    """A schema as a short type: ``json`` or ``text``, ``integer`` 1–20, array of ..."""
    s = _resolved(s, spec)
    if "anyOf" in s or "oneOf" in s:
        variants = [v for v in s.get("anyOf", s.get("oneOf", [])) if v.get("type") != "null"]
        return " or ".join(_type(v, spec) for v in variants)
    if "enum" in s:
        return " | ".join(f"`{v}`" for v in s["enum"])
    if "const" in s:
        return f"`{s['const']}`"
    kind = s.get("type", "any")
    if kind == "array":
        most = f", at most {s['maxItems']}" if "maxItems" in s else ""
        return f"array of {_type(s.get('items', {}), spec)}{most}"
    if kind == "object" and "properties" in s:
        fields = ", ".join(f"`{k}`: {_type(v, spec)}" for k, v in s["properties"].items())
        return f"object {{{fields}}}"
    if s.get("format") == "binary":
        return "file"
    return f"`{kind}`" + _bounds(s)


def _bounds(s: dict[str, Any]) -> str:
    low, high = s.get("minimum"), s.get("maximum")
    if low is not None and high is not None:
        return f" {_number(low)}–{_number(high)}"
    if low is not None:
        return f" ≥ {_number(low)}"
    if high is not None:
        return f" ≤ {_number(high)}"
    return ""


def _default(s: dict[str, Any]) -> str:
    if "default" not in s or s["default"] is None:
        return ""
    value = s["default"]
    return f"`{str(value).lower() if isinstance(value, bool) else _number(value)}`"


def _number(value: object) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _resolved(s: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    ref = s.get("$ref")
    if ref is None:
        return s
    named: dict[str, Any] = spec["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return named | {k: v for k, v in s.items() if k != "$ref"}


def _outside(app: FastAPI) -> str:
    """The routes the OpenAPI schema leaves out that say what they do: the WebSocket, the
    dashboard's page, the metrics."""
    lines = ["## Outside the OpenAPI schema"]
    for route in _routes(app.routes):
        if isinstance(route, APIWebSocketRoute):
            title = f"`WEBSOCKET {route.path}`"
        elif isinstance(route, APIRoute) and not route.include_in_schema:
            title = f"`{'/'.join(sorted(route.methods or ()))} {route.path}`"
        else:
            continue
        doc = route.endpoint.__doc__
        if doc:
            lines += ["", f"### {title}", "", _text(doc)]
    return "\n".join(lines)


def _routes(routes: list[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route, those of included routers too (FastAPI keeps an included router whole,
    as its ``original_router``)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        yield from _routes(included.routes) if included is not None else (route,)


def _text(doc: str) -> str:
    """A docstring as Markdown: reST's double backticks single, its paragraphs kept, each
    paragraph's lines joined."""
    paragraphs = re.split(r"\n\s*\n", doc.strip())
    joined = [" ".join(line.strip() for line in p.splitlines()) for p in paragraphs]
    return "\n\n".join(p.replace("``", "`") for p in joined)


def _cell(text: str | None) -> str:
    return _text(text or "").replace("\n\n", " ").replace("|", "\\|")


def _row(cells: list[str | None]) -> str:
    return "| " + " | ".join(_cell(c) if c else "" for c in cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asrserve.api.reference")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", type=Path, help="write the reference to this file")
    action.add_argument("--check", type=Path, help="fail if this file is not the reference")
    args = parser.parse_args(argv)
    made = markdown()
    if args.write:
        args.write.write_text(made, encoding="utf-8")
        return 0
    path: Path = args.check
    if not path.exists() or path.read_text(encoding="utf-8") != made:
        print(f"{path}: differs from the OpenAPI schema; run --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
