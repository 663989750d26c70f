"""Fixtures for the backend contracts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from asrserve.sqlite import Database


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "test.db")
    yield db
    db.close()
