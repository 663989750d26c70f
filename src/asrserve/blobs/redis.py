"""Distributed: worker nodes may be other machines, so the API node hands the audio on
after admitting it:

- up to ``redis_blob_max_bytes`` (8 MiB, about 4 min of 16 kHz WAV or hours of compressed
  audio) it goes into Redis under ``{prefix}:blob:<job id>`` and ``audio_path`` becomes
  ``redis-blob:<job id>``. Nothing else to mount or share; it costs Redis memory while the
  job waits (the blob is deleted when the job ends, or after ``audio_retention_s``), and
  it is exactly as durable as the job record (the same AOF).
- larger files move to ``shared_dir/audio`` (a directory every node mounts, e.g. NFS), and
  ``audio_path`` is that path. Without a ``shared_dir`` this is ``data_dir``, which only
  works for nodes on one machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import redis.asyncio as aioredis

from asrserve.blobs.base import Blobs, delete_file
from asrserve.errors import AudioMissing
from asrserve.settings.distributed import DistributedSettings

REDIS_SCHEME = "redis-blob:"


class RedisBlobs(Blobs):
    def __init__(
        self,
        settings: DistributedSettings,
        client: aioredis.Redis,
        *,
        shared_audio_dir: Path,
        audio_dir: Path,
    ) -> None:
        """Audio over ``redis_blob_max_bytes`` goes to ``shared_audio_dir``
        (``Settings.shared_audio_dir``); audio fetched from Redis is written under this
        node's ``audio_dir`` (the storage's) while its job runs."""
        self._settings = settings
        self._client = client
        self._shared_audio_dir = shared_audio_dir
        self._audio_dir = audio_dir

    async def keep(self, job_id: str, path: Path, size: int) -> str:
        if size <= self._settings.redis_blob_max_bytes:
            data = await asyncio.to_thread(path.read_bytes)
            await self._client.set(self._key(job_id), data)
            await asyncio.to_thread(path.unlink, missing_ok=True)
            return REDIS_SCHEME + job_id
        target = self._shared_audio_dir / job_id
        if target != path:
            await asyncio.to_thread(_move, path, target)
        return str(target)

    @contextlib.asynccontextmanager
    async def local(self, audio_path: str) -> AsyncIterator[Path]:
        if not audio_path.startswith(REDIS_SCHEME):
            yield Path(audio_path)
            return
        job_id = audio_path.removeprefix(REDIS_SCHEME)
        data = await self._client.get(self._key(job_id))
        if not isinstance(data, bytes):
            raise AudioMissing("the job's audio is no longer stored")
        local = self._audio_dir / f"{job_id}.{secrets.token_hex(4)}.fetched"
        await asyncio.to_thread(_write, local, data)
        try:
            yield local
        finally:
            local.unlink(missing_ok=True)

    async def delete(self, audio_path: str) -> None:
        if audio_path.startswith(REDIS_SCHEME):
            await self._client.delete(self._key(audio_path.removeprefix(REDIS_SCHEME)))
        else:
            await delete_file(audio_path)

    def _key(self, job_id: str) -> str:
        return f"{self._settings.redis_prefix}:blob:{job_id}"


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _move(source: Path, target: Path) -> None:
    """Into the shared directory, durably (a copy when it is another file system)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    shutil.copyfile(source, partial)
    with partial.open("rb") as handle:
        os.fsync(handle.fileno())
    partial.replace(target)
    source.unlink(missing_ok=True)
