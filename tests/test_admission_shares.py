"""One key cannot keep the others out of a priority class: past its share of the class's
backlog (``ASRSERVE_MAX_QUEUED_SHARE``) its uploads get ``429 queue_full`` while another key
still queues; and a file's stated duration counts only as far as its packets reach, so a
small file claiming four hours holds the backlog for the seconds it holds.

An API node with no worker node (Redis, distributed mode, auth on): what it accepts stays
queued for as long as the test runs, without timing."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import av
import httpx
import pytest

from asrserve.audio.decode import decode
from asrserve.bench.corpus import Clip
from asrserve.bench.redis_process import RedisProcess
from tests.support.cluster import Cluster
from tests.support.keys import auth
from tests.support.payloads import opus

pytestmark = pytest.mark.slow
STATED_S = 14_399.9  # under the 4 h duration limit, far over the class's backlog limit
ENV = {
    "ASRSERVE_AUTH": "on",
    "ASRSERVE_MAX_QUEUED_JOBS": "8",  # a key's share: 2 jobs
    "ASRSERVE_MAX_QUEUED_AUDIO_S": "600",  # a key's share: 150 s
    "ASRSERVE_MAX_QUEUED_SHARE": "0.25",
}


@dataclass
class Node:
    url: str
    admin: str
    alice: str
    bob: str


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    redis = RedisProcess(tmp_path / "redis").start()
    deployment = Cluster(tmp_path, redis, env=ENV)
    try:
        secrets = [_key(redis.url, name, *flags) for name, *flags in _NAMES]
        yield Node(deployment.api().url, *secrets)
    finally:
        deployment.stop()
        redis.stop()


_NAMES = (("ops", "--admin"), ("alice",), ("bob",))


def _key(broker: str, name: str, *flags: str) -> str:
    command = [sys.executable, "-m", "asrserve.cli", "keys", "create", "--name", name]
    done = subprocess.run(
        [*command, *flags, "--broker", broker], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _post(url: str, secret: str, name: str, audio: bytes) -> httpx.Response:
    return httpx.post(
        f"{url}/v1/jobs", files={"file": (name, audio)}, headers=auth(secret), timeout=60
    )


def test_a_key_past_its_share_is_refused_while_another_queues(
    node: Node, corpus: list[Clip]
) -> None:
    clip = min(corpus, key=lambda c: c.duration)
    audio = clip.path.read_bytes()
    first = [_post(node.url, node.alice, clip.path.name, audio) for _ in range(2)]
    assert [r.status_code for r in first] == [202, 202], [r.text for r in first]

    refused = _post(node.url, node.alice, clip.path.name, audio)
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "queue_full"
    assert error["message"].startswith("you hold 2 jobs"), error
    assert "of the async queue, your share of it" in error["message"], error
    assert int(refused.headers["retry-after"]) >= 1

    other = _post(node.url, node.bob, clip.path.name, audio)
    assert other.status_code == 202, other.text  # the class still has room for bob
    stats = httpx.get(f"{node.url}/v1/scheduler", headers=auth(node.admin), timeout=30)
    assert stats.json()["admission"]["async"]["jobs"] == 3


def test_a_stated_duration_the_file_cannot_hold_counts_as_its_packets(
    node: Node, corpus: list[Clip]
) -> None:
    """A 5 s WebM whose header claims 14,399.9 s: admitted, for 5 s (today's 600 s limit
    would refuse the claim), and its job says so."""
    seconds = 5.0
    clip = max(corpus, key=lambda c: c.duration)
    samples = decode(clip.path, 3600.0)[: int(seconds * 16_000)]
    lying = _claiming(opus(samples, "webm"), STATED_S)
    with av.open(io.BytesIO(lying), mode="r") as container:
        assert container.duration == pytest.approx(STATED_S * 1e6)  # what the header says

    accepted = _post(node.url, node.alice, "long.webm", lying)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["audio_duration"] == pytest.approx(seconds, abs=0.05)
    stats = httpx.get(f"{node.url}/v1/scheduler", headers=auth(node.admin), timeout=30)
    assert stats.json()["admission"]["async"]["audio_s"] == pytest.approx(seconds, abs=0.1)


def _claiming(webm: bytes, seconds: float) -> bytes:
    """``webm`` with its Segment Info Duration (EBML ID 0x4489, in milliseconds at the
    default timecode scale) replaced by ``seconds``."""
    data = bytearray(webm)
    at = data.find(b"\x44\x89")
    size = data[at + 2] & 0x7F
    assert at > 0 and data[at + 2] & 0x80 and size in (4, 8), "no Duration element"
    packed = struct.pack(">d" if size == 8 else ">f", seconds * 1000)
    data[at + 3 : at + 3 + size] = packed
    return bytes(data)
