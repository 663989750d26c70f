"""Embedded: the audio stays the file the upload was written to, and a job's
``audio_path`` is that path."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from asrserve.blobs.base import Blobs, delete_file


class LocalBlobs(Blobs):
    async def keep(self, job_id: str, path: Path, size: int) -> str:
        return str(path)

    @contextlib.asynccontextmanager
    async def local(self, audio_path: str) -> AsyncIterator[Path]:
        yield Path(audio_path)

    async def delete(self, audio_path: str) -> None:
        await delete_file(audio_path)
