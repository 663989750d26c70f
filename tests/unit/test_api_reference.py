"""docs/api.md is made from the app's OpenAPI schema: a route is described once, in its code."""

from __future__ import annotations

from pathlib import Path

from asrserve.api.reference import main, markdown, schema

API = Path(__file__).resolve().parents[2] / "docs" / "api.md"


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
