"""A job's decoded audio, kept as 16 kHz int16 in a temporary file rather than in memory.

The first :data:`IN_MEMORY_BYTES` stay in memory (a few minutes of audio: most requests
never touch the disk); past that the samples move to an unnamed temporary file, which the
operating system removes with the process if it dies. A chunk's samples are read back
when the chunk is about to run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from asrserve.engine.base import SAMPLING_RATE

IN_MEMORY_BYTES = 8 * 1024 * 1024  # 4.4 minutes of 16 kHz int16
SAMPLE_BYTES = 2


class Pcm:
    def __init__(self, folder: Path | None = None) -> None:
        self._file = tempfile.SpooledTemporaryFile(  # noqa: SIM115 (closed by close())
            max_size=IN_MEMORY_BYTES, dir=None if folder is None else str(folder)
        )
        self.samples = 0

    @property
    def duration(self) -> float:
        return self.samples / SAMPLING_RATE

    def append(self, block: np.ndarray) -> None:
        self._file.seek(0, 2)
        self._file.write(np.ascontiguousarray(block, dtype=np.int16).tobytes())
        self.samples += block.shape[0]

    def read(self, start: int, end: int) -> np.ndarray:
        """Samples ``[start, end)`` as float32 in [-1, 1)."""
        start, end = max(start, 0), min(end, self.samples)
        if end <= start:
            return np.zeros(0, dtype=np.float32)
        self._file.seek(start * SAMPLE_BYTES)
        data = self._file.read((end - start) * SAMPLE_BYTES)
        return np.frombuffer(data, dtype=np.int16).astype(np.float32) / 32768.0

    def close(self) -> None:
        self._file.close()
