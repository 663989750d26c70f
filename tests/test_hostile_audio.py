"""Audio that lies about itself, against one real server with auth on (#13 items 2, 3, 5).

- a tiny file that decodes into hours (1 Hz WAV) costs bounded memory while it runs;
- a header that overstates the audio leaves nothing in the admission backlog;
- a file that states no duration is charged what it decodes to against the daily quota;
- a file whose tags FFmpeg would hold in memory past the probe's budget is refused at
  intake, and one within it is transcribed (#25 item 2).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from asrserve.bench.corpus import Clip, write_wav
from asrserve.bench.hostile import with_pictures
from asrserve.bench.soak import RssSampler, rss_bytes
from tests.support.keys import auth, new_key
from tests.support.payloads import Speech, flac_total_samples
from tests.support.servers import Server

pytestmark = pytest.mark.slow

MIB = 1024 * 1024
SYNC = "/v1/audio/transcriptions"
QUOTA_MINUTES = 0.3  # 18 s of audio a day


class Keys:
    def __init__(self, data: Path) -> None:
        self.admin = auth(new_key(data, "admin", "--admin"))
        self.quota = auth(new_key(data, "metered", "--audio-minutes-per-day", str(QUOTA_MINUTES)))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Keys]]:
    data = tmp_path_factory.mktemp("hostile-audio") / "data"
    keys = Keys(data)
    server = Server(data, env={"ASRSERVE_AUTH": "on"}).start()
    yield server, keys
    server.stop()


@pytest.fixture(scope="module")
def speech(corpus: list[Clip]) -> Speech:
    return Speech(next(clip for clip in corpus if clip.path.name == "clip_00.wav"))


def upload(server: Server, path: str, flac: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(
        f"{server.url}{path}", files={"file": ("a.flac", flac)}, headers=headers, timeout=60
    )


def finished(server: Server, job_id: str, headers: dict[str, str]) -> dict[str, object]:
    for _ in range(60):
        job: dict[str, object] = httpx.get(
            f"{server.url}/v1/jobs/{job_id}", params={"wait": 30}, headers=headers, timeout=40
        ).json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
    raise AssertionError(f"job {job_id} did not finish")


def test_an_hour_in_a_tiny_file_costs_bounded_memory(
    hostile: tuple[Server, Keys], tmp_path: Path
) -> None:
    """3,600 samples at 1 Hz: 7 KB that decode into an hour of 16 kHz audio (460 MB as the
    float32 the decoder used to hold twice). Decoded a frame at a time, it costs little."""
    server, keys = hostile
    assert server.proc is not None
    path = tmp_path / "slow.wav"
    write_wav(path, np.zeros(3600, dtype=np.int16), rate=1)
    idle = rss_bytes(server.proc.pid)
    with RssSampler(server.proc.pid, 0.05, time.monotonic()) as sampler, path.open("rb") as f:
        response = httpx.post(
            f"{server.url}/v1/jobs", files={"file": f}, headers=keys.admin, timeout=60
        )
        assert response.status_code == 202, response.text
        job = finished(server, response.json()["id"], keys.admin)
    assert job["status"] == "succeeded"
    assert job["audio_duration"] == pytest.approx(3600.0)
    assert sampler.peak - idle < 150 * MIB, f"{(sampler.peak - idle) / MIB:.0f} MiB above idle"


def test_an_overstated_header_leaves_the_backlog_empty(
    hostile: tuple[Server, Keys], speech: Speech
) -> None:
    """The FLAC header says 60 s, the file holds 5.4 s: admission counted 60 s, and must
    take off 60 s, not the decoded 5.4 s, when the job ends."""
    server, keys = hostile
    lying = flac_total_samples(speech.flac, 60 * 16_000)
    response = upload(server, "/v1/jobs", lying, keys.admin)
    assert response.status_code == 202, response.text
    job = finished(server, response.json()["id"], keys.admin)
    assert job["status"] == "succeeded"
    assert job["audio_duration"] == pytest.approx(5.4, abs=0.2)
    view = httpx.get(f"{server.url}/v1/scheduler", headers=keys.admin, timeout=10).json()
    assert view["admission"]["async"] == {"jobs": 0, "audio_s": 0.0}


def test_audio_without_a_stated_duration_is_charged_what_it_decodes_to(
    hostile: tuple[Server, Keys], speech: Speech
) -> None:
    """A FLAC whose header says "length unknown" used to cost nothing against the quota
    (18 s a day here). Its 21.6 s are charged when decoded: over the quota, the job fails
    with 429 before it runs, and the quota is still there for audio that fits."""
    server, keys = hostile
    unstated = flac_total_samples(speech.long_flac(), 0)
    response = upload(server, SYNC, unstated, keys.quota)
    assert response.status_code == 429, response.text
    assert response.json()["error"]["code"] == "quota_exceeded"
    fits = upload(server, SYNC, speech.flac, keys.quota)
    assert fits.status_code == 200, fits.text
    assert "road" in fits.json()["text"].lower()


def test_tags_that_need_more_than_the_probe_budget_are_refused(
    hostile: tuple[Server, Keys], speech: Speech
) -> None:
    """Three 50 MB cover pictures (150 MB that FFmpeg holds once it opens the file, each
    under its 64 MiB allocation cap) are more than a probe may use (192 MiB less that cap):
    413 ``audio_metadata_too_large``, before the server's decoder opens it. The same speech
    behind one 120 MB picture (over the cap: FFmpeg skips it) is transcribed, the server's
    memory never holding the picture (it held it twice: probe, then decoder)."""
    server, keys = hostile
    assert server.proc is not None
    heavy = with_pictures(speech.mp3, 3, 50 * 1000 * 1000)
    response = httpx.post(
        f"{server.url}/v1/jobs", files={"file": ("a.mp3", heavy)}, headers=keys.admin, timeout=120
    )
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "audio_metadata_too_large"
    light = with_pictures(speech.mp3, 1, 120 * 1000 * 1000)
    idle = rss_bytes(server.proc.pid)
    with RssSampler(server.proc.pid, 0.05, time.monotonic()) as sampler:
        response = httpx.post(
            f"{server.url}/v1/jobs",
            files={"file": ("a.mp3", light)},
            headers=keys.admin,
            timeout=120,
        )
        assert response.status_code == 202, response.text
        job = finished(server, response.json()["id"], keys.admin)
    assert job["status"] == "succeeded", job
    assert "road" in str(job["result"]["text"]).lower()  # type: ignore[index]
    assert sampler.peak - idle < 100 * MIB, f"{(sampler.peak - idle) / MIB:.0f} MiB above idle"
