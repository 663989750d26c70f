"""Live sessions and the other tenants (#25 items 5, 6), against one real server with auth
on: audio is charged to the daily quota as it arrives, committed or not; one key holds at
most its share of a node's sessions; a session whose client sends nothing is closed."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.support.keys import new_key
from tests.support.servers import Server

pytestmark = pytest.mark.slow

MAX_SESSIONS = 8  # a key's share: a quarter, 2
IDLE_S = 8.0  # longer than any other test here keeps a session silent
QUOTA_MINUTES = 0.1  # 6 s of audio a day


@dataclass
class Tenants:
    server: Server
    alice: str
    bob: str
    metered: str


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenants]:
    data: Path = tmp_path_factory.mktemp("live-tenants") / "data"
    alice, bob = new_key(data, "alice"), new_key(data, "bob")
    metered = new_key(data, "metered", "--audio-minutes-per-day", str(QUOTA_MINUTES))
    env = {
        "ASRSERVE_AUTH": "on",
        "ASRSERVE_LIVE_MAX_SESSIONS": str(MAX_SESSIONS),
        "ASRSERVE_LIVE_IDLE_TIMEOUT_S": str(IDLE_S),
    }
    server = Server(data, env=env).start()
    yield Tenants(server, alice, bob, metered)
    server.stop()


def session(server: Server, key: str) -> ClientConnection:
    url = server.url.replace("http://", "ws://") + "/v1/realtime?intent=transcription"
    headers = {"Authorization": f"Bearer {key}"}
    return connect(url, additional_headers=headers, open_timeout=10, close_timeout=5)


def first(ws: ClientConnection) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(ws.recv(timeout=10))
    return event


def refused(ws: ClientConnection) -> tuple[str, int | None]:
    """The error code of the session's last event, and the close code that followed it."""
    event = first(ws)
    while event["type"] != "error":
        event = first(ws)
    with pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=10)
    return event["error"]["code"], closed.value.rcvd.code if closed.value.rcvd else None


def append(seconds: float) -> str:
    audio = np.zeros(int(seconds * 24000), dtype="<i2").tobytes()
    return json.dumps(
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(audio).decode()}
    )


def test_live_audio_is_charged_as_it_arrives(tenants: Tenants) -> None:
    """6 s a day: a session that streams and clears, never committing, is refused once 6 s
    are charged (2 s at open, then 2 s ahead as audio arrives), and the key's next session
    is refused at open. Interim text used to be free: this went on for ever."""
    with session(tenants.server, tenants.metered) as ws:
        assert first(ws)["type"] == "session.created"
        for _ in range(4):  # 8 s in all, within the 10 s a client may send ahead
            ws.send(append(2.0))
            ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
        assert refused(ws) == ("quota_exceeded", 1008)
    with session(tenants.server, tenants.metered) as ws:
        assert refused(ws) == ("quota_exceeded", 1008)


def test_one_key_holds_its_share_of_the_sessions(tenants: Tenants) -> None:
    """A quarter of the node's 8 sessions: alice's third is refused (1013, try again
    later) while her two stay open, and bob opens his."""
    with (
        session(tenants.server, tenants.alice) as one,
        session(tenants.server, tenants.alice) as two,
    ):
        for ws in (one, two):
            assert first(ws)["type"] == "session.created"
        with session(tenants.server, tenants.alice) as three:
            assert refused(three) == ("too_many_sessions", 1013)
        with session(tenants.server, tenants.bob) as other:
            assert first(other)["type"] == "session.created"


def test_a_silent_client_is_closed(tenants: Tenants) -> None:
    """A session that sends nothing for the idle timeout (8 s here) ends with
    ``session_idle_timeout``: it no longer holds a slot for ever."""
    with session(tenants.server, tenants.bob) as ws:
        assert first(ws)["type"] == "session.created"
        assert refused(ws) == ("session_idle_timeout", 1008)
