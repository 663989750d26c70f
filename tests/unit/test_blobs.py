"""The blobs contract, run against the embedded blobs (the upload stays put) and the Redis
ones (the upload travels in Redis, or through the shared directory when large)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis.asyncio as aioredis

from asrserve.blobs.base import Blobs
from asrserve.blobs.local import LocalBlobs
from asrserve.blobs.redis import RedisBlobs
from asrserve.errors import AudioMissing
from asrserve.settings import Settings
from tests.support.loop import Run

AUDIO = b"RIFF" + bytes(range(256)) * 4


def upload(settings: Settings, job_id: str, data: bytes = AUDIO) -> Path:
    """An upload as the API writes it before the job is admitted."""
    path = settings.audio_dir / f"{job_id}.upload"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


async def read(blobs: Blobs, audio_path: str) -> bytes:
    async with blobs.local(audio_path) as local:
        return local.read_bytes()


def files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


class BlobsContract:
    @pytest.fixture
    def settings(self, tmp_path: Path) -> Settings:
        return Settings(data_dir=tmp_path / "data", redis_prefix="test")

    @pytest.fixture
    def blobs(self, settings: Settings) -> Blobs:
        raise NotImplementedError

    def test_kept_audio_reads_back_as_a_file_every_time(
        self, blobs: Blobs, settings: Settings, run: Run
    ) -> None:
        audio_path = run(blobs.keep("job_1", upload(settings, "job_1"), len(AUDIO)))
        assert run(read(blobs, audio_path)) == AUDIO
        assert run(read(blobs, audio_path)) == AUDIO  # a retried job reads it again

    def test_delete_leaves_nothing_behind_and_may_be_repeated(
        self, blobs: Blobs, settings: Settings, run: Run
    ) -> None:
        audio_path = run(blobs.keep("job_1", upload(settings, "job_1"), len(AUDIO)))
        run(read(blobs, audio_path))
        run(blobs.delete(audio_path))
        run(blobs.delete(audio_path))
        assert files_under(settings.data_dir) == []

    def test_jobs_keep_their_own_audio(self, blobs: Blobs, settings: Settings, run: Run) -> None:
        first = run(blobs.keep("job_1", upload(settings, "job_1"), len(AUDIO)))
        second = run(blobs.keep("job_2", upload(settings, "job_2", b"other"), 5))
        run(blobs.delete(first))
        assert run(read(blobs, second)) == b"other"


def redis_blobs(settings: Settings, client: aioredis.Redis) -> RedisBlobs:
    """Redis blobs as the distributed backend wires them from ``settings``."""
    shared, audio = settings.shared_audio_dir, settings.audio_dir
    return RedisBlobs(settings, client, shared_audio_dir=shared, audio_dir=audio)


class TestLocalBlobs(BlobsContract):
    @pytest.fixture
    def blobs(self, settings: Settings) -> Blobs:
        return LocalBlobs()

    def test_the_upload_is_the_audio(self, blobs: Blobs, settings: Settings, run: Run) -> None:
        path = upload(settings, "job_1")
        assert run(blobs.keep("job_1", path, len(AUDIO))) == str(path)


class TestRedisBlobs(BlobsContract):
    @pytest.fixture
    def blobs(self, settings: Settings, redis_client: aioredis.Redis) -> Blobs:
        return redis_blobs(settings, redis_client)

    def test_small_audio_travels_in_redis(
        self, blobs: Blobs, settings: Settings, redis_client: aioredis.Redis, run: Run
    ) -> None:
        audio_path = run(blobs.keep("job_1", upload(settings, "job_1"), len(AUDIO)))
        assert audio_path == "redis-blob:job_1"
        assert files_under(settings.data_dir) == []  # nothing to share between machines
        assert run(redis_client.get("test:blob:job_1")) == AUDIO
        run(blobs.delete(audio_path))
        assert run(redis_client.exists("test:blob:job_1")) == 0
        with pytest.raises(AudioMissing):
            run(read(blobs, audio_path))

    def test_large_audio_moves_to_the_shared_directory(
        self, tmp_path: Path, redis_client: aioredis.Redis, run: Run
    ) -> None:
        settings = Settings(
            data_dir=tmp_path / "data",
            shared_dir=tmp_path / "shared",
            redis_prefix="test",
            redis_blob_max_bytes=len(AUDIO) - 1,
        )
        blobs = redis_blobs(settings, redis_client)
        audio_path = run(blobs.keep("job_1", upload(settings, "job_1"), len(AUDIO)))
        assert audio_path == str(tmp_path / "shared" / "audio" / "job_1")
        assert files_under(settings.data_dir) == []
        assert run(read(blobs, audio_path)) == AUDIO
