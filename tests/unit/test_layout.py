"""The suite's own layout: a test module imports helpers from ``tests.support`` only, never
from another test module or a conftest, so each can be read, run and changed alone."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def imported_test_modules(path: Path) -> list[str]:
    """The modules under ``tests`` that ``path`` imports, other than ``tests.support``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            names = ["." * node.level + (node.module or "")]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            inside = name.startswith(".") or name == "tests" or name.startswith("tests.")
            if inside and not name.startswith("tests.support"):
                found.append(name)
    return found


def test_test_modules_import_only_the_support_package() -> None:
    offenders = {
        str(path.relative_to(TESTS)): names
        for path in sorted(TESTS.rglob("*.py"))
        if (names := imported_test_modules(path))
    }
    assert offenders == {}


def test_the_check_sees_what_it_forbids(tmp_path: Path) -> None:
    module = tmp_path / "test_x.py"
    module.write_text(
        "from tests.test_faults import BOUNDARY\nimport tests.conftest\n"
        "from ..conftest import ROOT\nfrom tests.support.wait import wait_until\n"
    )
    assert imported_test_modules(module) == ["tests.test_faults", "tests.conftest", "..conftest"]
