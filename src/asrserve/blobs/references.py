"""A job's known speakers' references as blobs beside its audio (``{job id}.reference{n}``),
not in its stored options: a job's row names them, so listing jobs stays small. They go when
the job ends (or with its audio, whichever comes first)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from pathlib import Path

from asrserve.blobs.base import Blobs
from asrserve.vocabulary import KnownSpeaker


async def keep_references(
    blobs: Blobs, job_id: str, known: Sequence[KnownSpeaker], folder: Path
) -> tuple[KnownSpeaker, ...]:
    """``known`` with each reference kept as a blob of the job (their base64 dropped)."""
    kept = []
    for index, speaker in enumerate(known):
        name = f"{job_id}.reference{index}"
        data = base64.b64decode(speaker.audio)
        await asyncio.to_thread((folder / name).write_bytes, data)
        path = await blobs.keep(name, folder / name, len(data))
        kept.append(KnownSpeaker(name=speaker.name, audio_path=path))
    return tuple(kept)


async def drop_references(blobs: Blobs, known: Sequence[KnownSpeaker]) -> None:
    """The blobs :func:`keep_references` made, removed (twice is harmless)."""
    for speaker in known:
        if speaker.audio_path:
            await blobs.delete(speaker.audio_path)
