"""Live sessions and the other tenants (#25 items 5, 6), auth on: audio is charged to the
daily quota as it arrives, committed or not; one key holds at most its share of a node's
sessions; a session whose client sends nothing is closed.

The app runs in this process (``tests/support/inprocess.py``: a fake forward pass, the key
store, quotas and live sessions real), its WebSockets through starlette's ``TestClient``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient, WebSocketTestSession
from starlette.websockets import WebSocketDisconnect

from tests.support.inprocess import WS, in_process
from tests.support.keys import auth, new_key_here

MAX_SESSIONS = 8  # a key's share: a quarter, 2
IDLE_S = 8.0  # longer than any other test here keeps a session silent
SILENT_IDLE_S = 0.5  # the silent client's app alone: how long it waits to close it
QUOTA_MINUTES = 0.1  # 6 s of audio a day


@dataclass
class Tenants:
    client: TestClient
    alice: str
    bob: str
    metered: str


def env(idle_s: float) -> dict[str, str]:
    return {
        "ASRSERVE_AUTH": "on",
        "ASRSERVE_LIVE_MAX_SESSIONS": str(MAX_SESSIONS),
        "ASRSERVE_LIVE_IDLE_TIMEOUT_S": str(idle_s),
    }


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenants]:
    data: Path = tmp_path_factory.mktemp("live-tenants") / "data"
    alice, bob = new_key_here(data, "alice"), new_key_here(data, "bob")
    metered = new_key_here(data, "metered", "--audio-minutes-per-day", str(QUOTA_MINUTES))
    with in_process(data, env(IDLE_S)) as app:
        yield Tenants(app.client, alice, bob, metered)


def session(client: TestClient, key: str) -> WebSocketTestSession:
    return client.websocket_connect(WS + "/v1/realtime?intent=transcription", headers=auth(key))


def first(ws: WebSocketTestSession) -> dict[str, Any]:
    event: dict[str, Any] = ws.receive_json()
    return event


def refused(ws: WebSocketTestSession) -> tuple[str, int | None]:
    """The error code of the session's last event, and the close code that followed it."""
    event = first(ws)
    while event["type"] != "error":
        event = first(ws)
    with pytest.raises(WebSocketDisconnect) as closed:
        ws.receive_json()
    return event["error"]["code"], closed.value.code


def append(seconds: float) -> str:
    audio = np.zeros(int(seconds * 24000), dtype="<i2").tobytes()
    return json.dumps(
        {"type": "input_audio_buffer.append", "audio": base64.b64encode(audio).decode()}
    )


def test_live_audio_is_charged_as_it_arrives(tenants: Tenants) -> None:
    """6 s a day: a session that streams and clears, never committing, is refused once 6 s
    are charged (2 s at open, then 2 s ahead as audio arrives), and the key's next session
    is refused at open. Interim text used to be free: this went on for ever."""
    with session(tenants.client, tenants.metered) as ws:
        assert first(ws)["type"] == "session.created"
        for _ in range(4):  # 8 s in all, within the 10 s a client may send ahead
            ws.send_text(append(2.0))
            ws.send_text(json.dumps({"type": "input_audio_buffer.clear"}))
        assert refused(ws) == ("quota_exceeded", 1008)
    with session(tenants.client, tenants.metered) as ws:
        assert refused(ws) == ("quota_exceeded", 1008)


def test_one_key_holds_its_share_of_the_sessions(tenants: Tenants) -> None:
    """A quarter of the node's 8 sessions: alice's third is refused (1013, try again
    later) while her two stay open, and bob opens his."""
    with (
        session(tenants.client, tenants.alice) as one,
        session(tenants.client, tenants.alice) as two,
    ):
        for ws in (one, two):
            assert first(ws)["type"] == "session.created"
        with session(tenants.client, tenants.alice) as three:
            assert refused(three) == ("too_many_sessions", 1013)
        with session(tenants.client, tenants.bob) as other:
            assert first(other)["type"] == "session.created"


def test_a_silent_client_is_closed(tmp_path: Path) -> None:
    """A session that sends nothing for the idle timeout (0.5 s, on an app of its own)
    ends with ``session_idle_timeout``: it no longer holds a slot for ever."""
    data = tmp_path / "data"
    bob = new_key_here(data, "bob")
    with in_process(data, env(SILENT_IDLE_S)) as app, session(app.client, bob) as ws:
        assert first(ws)["type"] == "session.created"
        assert refused(ws) == ("session_idle_timeout", 1008)
