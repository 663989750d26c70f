"""The staged decode on the real model: a multi-minute file's first window is submitted
before its end is read, and its windows and text are those of the whole-file decode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asrserve.bench.corpus import Clip
from asrserve.engine.base import Engine
from asrserve.settings import Settings
from tests.support.transcribing import transcribe_file

pytestmark = pytest.mark.slow


def test_the_staged_transcript_is_the_whole_file_transcript(
    corpus: list[Clip], engine: Engine, tmp_path: Path
) -> None:
    clip = max(corpus, key=lambda c: c.duration)  # over two minutes: five windows
    runs: dict[bool, tuple[Any, list[Any]]] = {}
    for staged in (True, False):
        settings = Settings(
            data_dir=tmp_path / f"data-{staged}", staged_decode=staged, record_traffic=False
        )
        events: list[Any] = []
        transcript, reports = transcribe_file(clip.path, settings, engine, events)
        runs[staged] = (transcript, events)
        assert reports[-1].segments and reports[0].chunks_total <= reports[-1].chunks_total == 5
    (staged_text, staged_windows), (whole_text, whole_windows) = runs[True], runs[False]
    assert staged_windows == whole_windows and len(staged_windows) == 2  # one, then four
    assert staged_text.model_dump() == whole_text.model_dump()
    assert len(staged_text.segments) >= 5 and "cinnamon roll" in staged_text.text
