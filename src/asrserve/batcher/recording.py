"""Traffic recording: accepted jobs and executed batches as bounded JSON-lines files.

``data_dir/recordings/arrivals.jsonl`` gets one line per accepted job, ``batches.jsonl``
one per batch a device ran. When a file reaches ``max_lines`` it is renamed to ``.1``
(replacing the previous one), so at most ``2 × max_lines`` lines per stream stay on disk.

Each write is one small synchronous append (open, write, close: about 20 µs, see
docs/tuning.md), done on the event loop: nothing stays open, nothing to flush or close.
Recording never fails a request: an ``OSError`` is logged once and recording stops.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from asrserve.batcher.stats import BatchRecord
from asrserve.jobs.models import Job
from asrserve.settings.storage import StorageSettings

log = logging.getLogger(__name__)

ARRIVALS = "arrivals.jsonl"
BATCHES = "batches.jsonl"


class _Stream:
    """One append-only JSON-lines file, rotated to ``.1`` at ``max_lines``."""

    def __init__(self, path: Path, max_lines: int) -> None:
        self.path = path
        self.max_lines = max_lines
        self._lines = _count_lines(path)  # once, at start-up, before the event loop serves

    def append(self, row: dict[str, Any]) -> None:
        if self._lines >= self.max_lines:
            self.path.replace(self.path.with_name(self.path.name + ".1"))
            self._lines = 0
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._lines += 1


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


class TrafficRecorder:
    def __init__(self, folder: Path, max_lines: int = 100_000) -> None:
        if max_lines < 1:
            raise ValueError("max_lines must be at least 1")
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self._arrivals = _Stream(folder / ARRIVALS, max_lines)
        self._batches = _Stream(folder / BATCHES, max_lines)
        self._failed = False

    @classmethod
    def from_settings(cls, settings: StorageSettings) -> TrafficRecorder | None:
        """The recorder the settings ask for (``record_traffic``), or None."""
        if not settings.record_traffic:
            return None
        return cls(recordings_dir(settings.data_dir), settings.record_max_lines)

    def arrival(self, job: Job) -> None:
        """An accepted job: wall time, monotonic time (the scheduler's clock), audio, class."""
        row = {
            "t": round(time.time(), 4),
            "mono": round(time.monotonic(), 4),
            "duration": round(job.audio_duration or 0.0, 3),
            "priority": int(job.priority),
            "job": job.id,
        }
        self._write(self._arrivals, row)

    def batch(self, record: BatchRecord) -> None:
        """A batch a device ran; ``window_frames`` is the encoder window it was padded to."""
        row = {
            "device": record.device,
            "size": record.size,
            "started": round(record.started, 4),
            "finished": round(record.finished, 4),
            "compute": round(record.compute, 4),
            "audio_seconds": round(record.audio_seconds, 3),
            "window_frames": record.total_frames // record.size if record.size else 0,
            "padded_frames": record.padded_frames,
            "total_frames": record.total_frames,
            "waits": [round(w, 4) for w in record.waits],
        }
        self._write(self._batches, row)

    def _write(self, stream: _Stream, row: dict[str, Any]) -> None:
        if self._failed:
            return
        try:
            stream.append(row)
        except OSError:
            self._failed = True
            log.warning("traffic recording stopped: cannot write %s", stream.path, exc_info=True)


def recordings_dir(data_dir: Path) -> Path:
    return data_dir / "recordings"


def read_rows(path: Path) -> list[dict[str, Any]]:
    """A stream's rows, oldest first: the rotated ``.1`` file, then the current one."""
    rows: list[dict[str, Any]] = []
    for part in (path.with_name(path.name + ".1"), path):
        if part.exists():
            with part.open(encoding="utf-8") as handle:
                rows.extend(json.loads(line) for line in handle if line.strip())
    return rows
