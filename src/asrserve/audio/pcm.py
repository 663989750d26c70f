"""A job's decoded audio, kept as 16 kHz int16 in a temporary file rather than in memory.

The first :data:`IN_MEMORY_BYTES` stay in memory (a few minutes of audio: most requests
never touch the disk); past that the samples move to an unnamed temporary file, which the
operating system removes with the process if it dies. A chunk's samples are read back
when the chunk is about to run. Spilled audio leaves the data dir's reserve free
(:mod:`asrserve.drivers.disk`): past it the decode stops with :class:`StorageFull`, checked
each :data:`CHECK_BYTES`, before the file system is full for every other writer.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from asrserve.drivers.disk import DISK_RESERVE_BYTES, free_bytes
from asrserve.engine.base import SAMPLING_RATE
from asrserve.errors import StorageFull

IN_MEMORY_BYTES = 8 * 1024 * 1024  # 4.4 minutes of 16 kHz int16
SAMPLE_BYTES = 2
CHECK_BYTES = 1024 * 1024  # free space is checked before each MiB written to the spool


class Pcm:
    def __init__(
        self, folder: Path | None = None, free: Callable[[Path], int] = free_bytes
    ) -> None:
        self._file = tempfile.SpooledTemporaryFile(  # noqa: SIM115 (closed by close())
            max_size=IN_MEMORY_BYTES, dir=None if folder is None else str(folder)
        )
        self._folder = folder
        self._free = free
        self._checked_to = IN_MEMORY_BYTES  # bytes that may be held without a check
        self.samples = 0

    @property
    def duration(self) -> float:
        return self.samples / SAMPLING_RATE

    def append(self, block: np.ndarray) -> None:
        data = np.ascontiguousarray(block, dtype=np.int16).tobytes()
        size = self.samples * SAMPLE_BYTES + len(data)
        if size > self._checked_to and self._folder is not None:
            self._check_room(size)
        self._file.seek(0, 2)
        self._file.write(data)
        self.samples += block.shape[0]

    def _check_room(self, size: int) -> None:
        """Room for the spool to grow to ``size`` and :data:`CHECK_BYTES` more, beyond the
        reserve (the bytes already spilled are on the disk: only what is new counts)."""
        assert self._folder is not None
        held = self.samples * SAMPLE_BYTES
        on_disk = held if held > IN_MEMORY_BYTES else 0  # it rolled over: all of it is there
        if self._free(self._folder) - (size - on_disk + CHECK_BYTES) < DISK_RESERVE_BYTES:
            raise StorageFull(
                "the server's disk has no room for the decoded audio; try again later"
            )
        self._checked_to = size + CHECK_BYTES

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


Samples = npt.NDArray[np.floating | np.integer] | Pcm  # 16 kHz mono, in memory or spooled


def read(samples: Samples, start: int, end: int) -> npt.NDArray[np.float32]:
    """Samples ``[start, end)`` as float32 in [-1, 1) (16-bit integers are scaled)."""
    if isinstance(samples, Pcm):
        return samples.read(start, end)
    piece = samples[max(start, 0) : max(end, 0)]
    scale = 1 / 32768.0 if piece.dtype == np.int16 else 1.0
    out: npt.NDArray[np.float32] = piece.astype(np.float32) * np.float32(scale)
    return out


def count(samples: Samples) -> int:
    """How many samples there are."""
    return samples.samples if isinstance(samples, Pcm) else len(samples)
