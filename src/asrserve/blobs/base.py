"""Where a job's audio waits between the node that received it and the one that runs it.

An upload is written to a file first; :meth:`Blobs.keep` hands it on once the job is
admitted and returns the job's ``audio_path``; whoever runs the job reads it through
:meth:`Blobs.local` as a file; :meth:`Blobs.delete` removes it when the job no longer needs
it. ``local.py`` keeps the upload where it is (embedded: one machine, one process);
``redis.py`` hands it to other machines (distributed).
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from pathlib import Path


class Blobs(ABC):
    @abstractmethod
    async def keep(self, job_id: str, path: Path, size: int) -> str:
        """Hand an admitted upload on; returns the job's ``audio_path``."""

    @abstractmethod
    def local(self, audio_path: str) -> contextlib.AbstractAsyncContextManager[Path]:
        """The audio as a local file for as long as the context lasts."""

    @abstractmethod
    async def delete(self, audio_path: str) -> None:
        """Remove the job's audio; removing it twice is harmless."""


async def delete_file(audio_path: str) -> None:
    """An ``audio_path`` that is a file path, removed (none: nothing to remove)."""
    if audio_path:
        await asyncio.to_thread(Path(audio_path).unlink, missing_ok=True)
