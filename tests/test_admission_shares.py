"""One key cannot keep the others out of a priority class: past its share of the class's
backlog (``ASRSERVE_MAX_QUEUED_SHARE``) its uploads get ``429 queue_full`` while another key
still queues; and a file's stated duration counts only as far as its packets reach, so a
small file claiming four hours holds the backlog for the seconds it holds.

HTTP and admission semantics: the app in this process (``tests/support/inprocess.py``, auth
on, the uploads, probes and stores real), its fake device held (``gate``) so that what it
accepts stays unfinished while the test asks, without timing. The shares' arithmetic on the
Redis backlog that API nodes share is the admission contract's (``tests/unit/test_admission.py``).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import av
import httpx2
import pytest
from starlette.testclient import TestClient

from asrserve.audio.decode import decode
from asrserve.bench.corpus import Clip
from tests.support.fakes import FakeEngine
from tests.support.inprocess import in_process
from tests.support.keys import auth, new_key_here
from tests.support.payloads import opus

STATED_S = 14_399.9  # under the 4 h duration limit, far over the class's backlog limit
ENV = {
    "ASRSERVE_AUTH": "on",
    "ASRSERVE_MAX_QUEUED_JOBS": "8",  # a key's share: 2 jobs
    "ASRSERVE_MAX_QUEUED_AUDIO_S": "600",  # a key's share: 150 s
    "ASRSERVE_MAX_QUEUED_SHARE": "0.25",
}


@dataclass
class Node:
    http: TestClient
    engine: FakeEngine
    admin: str
    alice: str
    bob: str


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    """The app, its device held until the test ends: nothing it accepts finishes."""
    data = tmp_path / "data"
    admin, alice, bob = (new_key_here(data, name, *flags) for name, *flags in _NAMES)
    with in_process(data, ENV) as app:
        (engine,) = app.engines
        engine.gate.clear()
        try:
            yield Node(app.client, engine, admin, alice, bob)
        finally:
            engine.gate.set()  # the app's shutdown need not wait out the held pass


_NAMES = (("ops", "--admin"), ("alice",), ("bob",))


def _post(http: TestClient, secret: str, name: str, audio: bytes) -> httpx2.Response:
    return http.post("/v1/jobs", files={"file": (name, audio)}, headers=auth(secret))


def test_a_key_past_its_share_is_refused_while_another_queues(
    node: Node, corpus: list[Clip]
) -> None:
    clip = min(corpus, key=lambda c: c.duration)
    audio = clip.path.read_bytes()
    first = [_post(node.http, node.alice, clip.path.name, audio) for _ in range(2)]
    assert [r.status_code for r in first] == [202, 202], [r.text for r in first]

    refused = _post(node.http, node.alice, clip.path.name, audio)
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "queue_full"
    assert error["message"].startswith("you hold 2 jobs"), error
    assert "of the async queue, your share of it" in error["message"], error
    assert int(refused.headers["retry-after"]) >= 1

    other = _post(node.http, node.bob, clip.path.name, audio)
    assert other.status_code == 202, other.text  # the class still has room for bob
    stats = node.http.get("/v1/scheduler", headers=auth(node.admin))
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

    accepted = _post(node.http, node.alice, "long.webm", lying)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["audio_duration"] == pytest.approx(seconds, abs=0.05)
    stats = node.http.get("/v1/scheduler", headers=auth(node.admin))
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
