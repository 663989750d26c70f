"""A file decoded a stage at a time: its first windows are known (and submitted) before its
end is read, and they are the windows the whole file's decode finds, to the sample."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asrserve.audio import staged as staged_module
from asrserve.audio.decode import stream
from asrserve.audio.features import decode_audio
from asrserve.audio.staged import StagedDecode
from asrserve.bench.corpus import Clip
from asrserve.jobs.models import Progress
from asrserve.settings import Settings
from asrserve.transcript import Transcript
from tests.support.fakes import FakeEngine
from tests.support.transcribing import transcribe_file


@pytest.mark.parametrize(
    ("vad", "first_window_s", "windows"), [(True, 30, 5), (False, 30, 5), (True, 8, 6)]
)
def test_each_stage_knows_the_first_windows_of_the_whole_file(
    long_clip: Clip, vad: bool, first_window_s: float, windows: int
) -> None:
    """Asked for one more window at a time, the staged decode knows each stage a prefix of
    the windows and speech regions the whole file's decode finds, and ends with all of them;
    the first window is known before the end of the file is read (a short first window, at
    ``first_window_s``, as well as a full one)."""
    whole = decode_audio(long_clip.path, max_seconds=3600, vad=vad, first_window_s=first_window_s)
    staged = StagedDecode(long_clip.path, max_seconds=3600, vad=vad, first_window_s=first_window_s)
    try:
        stages = []
        while not staged.known.complete:
            known = staged.advance(len(staged.known.spans) + 1)
            assert known.spans == whole.layout.spans[: len(known.spans)]
            assert known.speech == whole.layout.speech[: len(known.speech)]
            stages.append((len(known.spans), known.duration, known.complete))
        assert staged.decoded is not None and staged.decoded.layout == whole.layout
    finally:
        staged.close()
        whole.close()
    assert len(whole.layout.spans) == windows
    assert whole.layout.spans[0].duration <= first_window_s
    assert stages[0][:1] == (1,) and stages[0][1] < whole.duration - 60  # a minute unread
    assert [count for count, _, _ in stages] == list(range(1, windows + 1))
    assert [complete for _, _, complete in stages] == [False] * (windows - 1) + [True]


def test_a_file_of_one_window_is_known_at_its_end(tmp_path: Path) -> None:
    """Up to 30 s a file is one window of all of it, which only its end decides."""
    from asrserve.bench.corpus import write_wav

    path = tmp_path / "short.wav"
    tone = (np.sin(np.arange(16000 * 20) / 5) * 8000).astype(np.int16)
    write_wav(path, tone, 16000)
    staged = StagedDecode(path, max_seconds=3600, vad=False)
    try:
        known = staged.advance(1)
    finally:
        staged.close()
    assert known.complete and [span.pieces for span in known.spans] == [((0, 16000 * 20),)]


def _transcribe(
    clip: Clip, tmp_path: Path, staged: bool, events: list[Any]
) -> tuple[Transcript, list[list[float]], list[Progress]]:
    """The clip through the fake engine: its transcript, the engine's batches (window
    durations) and the progress reports."""
    settings = Settings(
        data_dir=tmp_path / f"data-{staged}", staged_decode=staged, record_traffic=False
    )
    engine = FakeEngine()
    transcript, reports = transcribe_file(clip.path, settings, engine, events)
    return transcript, engine.batches, reports


def test_the_first_window_is_submitted_before_the_end_of_the_file_is_read(
    long_clip: Clip, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Staged: the first window goes to the scheduler alone, then the rest of the file is
    read, then the other windows go; the transcript is the one the whole-file path gives,
    from the same windows in the same batches."""
    events: list[Any] = []

    def recorded(path: Path, max_seconds: float) -> Iterator[np.ndarray]:
        yield from stream(path, max_seconds)
        events.append("end of file read")

    monkeypatch.setattr(staged_module, "stream", recorded)
    staged, staged_batches, reports = _transcribe(long_clip, tmp_path, True, events)
    staged_events, events[:] = list(events), []
    whole, whole_batches, _ = _transcribe(long_clip, tmp_path, False, events)

    offsets = [0.0, 12.016, 41.024, 70.208, 99.76]  # the first window closed at 15 s
    assert staged_events == [
        ("submitted", offsets[:1]),
        "end of file read",
        ("submitted", offsets[1:]),
    ]
    assert events == ["end of file read", ("submitted", offsets[:1]), ("submitted", offsets[1:])]
    assert staged.model_dump() == whole.model_dump()
    assert staged_batches == whole_batches and len(staged_batches[0]) == 1
    # totals grow as windows become known; the last report has every window done
    assert reports[0].chunks_total == 1
    assert (reports[-1].chunks_done, reports[-1].chunks_total) == (5, 5)
    assert [s.text for s in reports[-1].segments] == [s.text for s in staged.segments]
