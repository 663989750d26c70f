"""docs/api.md is made from the app's OpenAPI schema: a route is described once, in its code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asrserve.api.reference import main, markdown, schema

API = Path(__file__).resolve().parents[2] / "docs" / "api.md"
FASTAPI_DEFAULT = "Successful Response"  # what FastAPI says of a route's answer left undescribed


def test_docs_api_md_is_what_the_schema_makes_now() -> None:
    assert main(["--check", str(API)]) == 0


def test_the_check_fails_on_a_stale_reference(tmp_path: Path) -> None:
    stale = tmp_path / "api.md"
    stale.write_text(markdown().replace("Liveness", "Aliveness"), encoding="utf-8")
    assert main(["--check", str(stale)]) == 1


def test_every_route_in_the_schema_says_what_it_does() -> None:
    spec = schema()
    undescribed = [
        f"{method.upper()} {path}"
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        if not op.get("description")
    ]
    assert undescribed == []


def test_the_routes_outside_the_schema_are_described_from_their_docstrings() -> None:
    made = markdown()
    for title in ("`WEBSOCKET /v1/realtime`", "`GET /metrics`", "`GET /`"):
        assert f"### {title}\n\n" in made


def _operations(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", op)
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
    ]


def test_every_route_says_what_its_success_answer_holds() -> None:
    defaulted = [
        f"{route} {status}"
        for route, op in _operations(schema())
        for status, response in op["responses"].items()
        if status.startswith("2") and response["description"] == FASTAPI_DEFAULT
    ]
    assert defaulted == []


def test_every_parameter_in_the_schema_is_described() -> None:
    undescribed = [
        f"{route} {param['name']}"
        for route, op in _operations(schema())
        for param in op.get("parameters", [])
        if not param.get("description")
    ]
    assert undescribed == []


def test_every_body_field_in_the_schema_is_described() -> None:
    spec = schema()
    undescribed = [
        f"{route} {name}"
        for route, op in _operations(spec)
        for content in op.get("requestBody", {}).get("content", {}).values()
        for name, field in _properties(content["schema"], spec).items()
        if not field.get("description")
    ]
    assert undescribed == []


def _properties(body: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    ref = body.get("$ref")
    named = spec["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else body
    properties: dict[str, Any] = named.get("properties", {})
    return properties
