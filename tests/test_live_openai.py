"""Live transcription through the official ``openai`` client's realtime connection, in
OpenAI's GA shape, against the real server and model: every server event is validated
against the client's own pydantic types (``tests/support/realtime_types.py``).

JFK as G.711 μ-law (8 kHz telephony), turns cut by server VAD, then committed by the
client, then cleared; and live translation (``task: "translate"``) on the multilingual base
model. That a turn whose decode cannot run is ``...transcription.failed`` and the session
goes on is the session's and the scheduler's, not the model's: the app in this process with
a fake forward pass (``tests/support/inprocess.py``), the client's events sent as the
``openai`` client sends them, each server event validated the same way.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from websockets.sync.client import connect as ws_connect
from websockets.typing import Subprotocol

from asrserve.audio.decode import decode
from asrserve.bench.live import pcm16
from asrserve.bench.wer import wer
from tests.support.g711 import encode
from tests.support.inprocess import WS, in_process
from tests.support.languages import MODEL_CACHE
from tests.support.real_speech import prompts
from tests.support.realtime_client import (
    TRANSCRIPTION,
    connect,
    receive,
    send_audio,
    settle,
    update,
)
from tests.support.realtime_types import ga_event
from tests.support.servers import JFK, REAL_SPEECH, Server

Event = dict[str, Any]


def settle_here(receive_here: Callable[[], Event], send: Callable[..., None]) -> list[Event]:
    """``settle`` (``tests/support/realtime_client.py``) over the in-process socket: a clear
    after the audio, then every event until each committed turn has ended."""
    send("input_audio_buffer.clear")
    seen = [receive_here()]
    while seen[-1]["type"] != "input_audio_buffer.cleared":
        seen.append(receive_here())
    ended = (f"{TRANSCRIPTION}.completed", f"{TRANSCRIPTION}.failed")

    def waiting() -> int:
        committed = sum(e["type"] == "input_audio_buffer.committed" for e in seen)
        return int(committed - sum(e["type"] in ended for e in seen))

    while waiting():
        seen.append(receive_here())
    return seen


@pytest.mark.slow
def test_the_openai_client_transcribes_telephone_audio_in_the_ga_shape(server: Server) -> None:
    refs = json.loads((REAL_SPEECH / "references.json").read_text())
    mulaw = encode(np.frombuffer(pcm16(decode(JFK, 60), 8000), dtype="<i2"), "pcmu")
    silence = encode(np.zeros(16000, dtype="<i2"), "pcmu")  # 2 s: the last turn ends
    with connect(server) as connection:
        created = receive(connection)
        assert created["type"] == "session.created", created
        pcm24 = {"type": "audio/pcm", "rate": 24000}
        assert created["session"]["audio"]["input"]["format"] == pcm24

        # translation asks for a multilingual model: an error naming the field, and the
        # session goes on
        update(connection, {"transcription": {"model": "whisper-1", "task": "translate"}}, [])
        error = receive(connection)
        assert error["type"] == "error", error
        assert error["error"]["param"] == "session.audio.input.transcription.task"

        audio_input = {
            "format": {"type": "audio/pcmu"},
            "transcription": {"model": "whisper-1", "language": "en"},
            "noise_reduction": {"type": "near_field"},
            "turn_detection": {"type": "server_vad", "silence_duration_ms": 500},
        }
        update(connection, audio_input, ["item.input_audio_transcription.logprobs"])
        updated = receive(connection)
        assert updated["type"] == "session.updated", updated
        shown = updated["session"]
        assert shown["audio"]["input"]["format"] == {"type": "audio/pcmu"}
        assert shown["audio"]["input"]["noise_reduction"] == {"type": "near_field"}
        assert shown["ignored"] == ["audio.input.noise_reduction"]  # accepted, not applied
        assert shown["include"] == ["item.input_audio_transcription.logprobs"]

        send_audio(connection, mulaw + silence, 8000, 1)
        by_vad = settle(connection)

        # the client commits: turn detection off, 3 s of JFK, commit
        update(connection, {"turn_detection": None}, [])
        assert receive(connection)["type"] == "session.updated"
        send_audio(connection, mulaw[: 3 * 8000], 8000, 1)
        connection.input_audio_buffer.commit()
        by_client = settle(connection)
        # what is cleared is gone: a commit after it has nothing to commit
        connection.input_audio_buffer.append(audio=base64.b64encode(mulaw[:8000]).decode())
        connection.input_audio_buffer.clear()
        assert receive(connection)["type"] == "input_audio_buffer.cleared"
        connection.input_audio_buffer.commit()
        assert receive(connection)["error"]["code"] == "input_audio_buffer_commit_empty"

    events = by_vad + by_client
    committed = [e for e in events if e["type"] == "input_audio_buffer.committed"]
    completed = [e for e in events if e["type"] == f"{TRANSCRIPTION}.completed"]
    items = [e["item_id"] for e in committed]
    assert len(items) >= 3 and [e["item_id"] for e in completed] == items, events
    # each turn follows the one before it
    assert [e["previous_item_id"] for e in committed] == [None, *items[:-1]]
    assert all(e["usage"]["type"] == "duration" and e["usage"]["seconds"] > 0 for e in completed)
    # include logprobs (set for the turns by VAD, [] again before the client's commit): each
    # of those turns carries its final decode's text tokens (its transcript keeps the words
    # its deltas sent, so the tokens may differ from it a little); the client's has none
    assert "logprobs" not in completed[-1]
    for event in completed[:-1]:
        tokens = event["logprobs"]
        assert tokens and all(token["logprob"] <= 0 for token in tokens), event
        heard = "".join(token["token"] for token in tokens)
        assert wer([event["transcript"]], [heard]) <= 0.2, (event["transcript"], heard)
    vad_text = " ".join(e["transcript"] for e in completed[:-1])
    assert wer([refs["jfk.flac"]], [vad_text]) <= 0.15, vad_text
    assert "fellow america" in completed[-1]["transcript"].lower()  # its first 3 s


def test_a_turn_no_device_can_run_fails_and_the_session_goes_on(tmp_path: Path) -> None:
    """A final deadline of a microsecond: no device can start a turn's decode in time (the
    scheduler drops work past its deadline before dispatching it)."""
    speech = pcm16(decode(JFK, 60)[: 2 * 16000], 24000)
    env = {"ASRSERVE_LIVE_FINAL_DEADLINE_S": "0.000001"}
    live = WS + "/v1/realtime?intent=transcription"
    with in_process(tmp_path / "data", env) as app, app.client.websocket_connect(live) as ws:

        def receive_here() -> Event:
            event: Event = ws.receive_json()
            ga_event(event)
            return event

        def send(kind: str, **fields: Any) -> None:
            ws.send_text(json.dumps({"type": kind, **fields}))

        assert receive_here()["type"] == "session.created"
        session = {"type": "transcription", "audio": {"input": {"turn_detection": None}}}
        send("session.update", session={**session, "include": []})
        assert receive_here()["type"] == "session.updated"
        failed = []
        for _ in range(2):
            step = 24000 * 2 // 5  # 200 ms appends, as send_audio sends them
            for at in range(0, len(speech), step):
                audio = base64.b64encode(speech[at : at + step]).decode()
                send("input_audio_buffer.append", audio=audio)
            send("input_audio_buffer.commit")
            events = settle_here(receive_here, send)
            [committed] = [e for e in events if e["type"] == "input_audio_buffer.committed"]
            failed += [e for e in events if e["type"] == f"{TRANSCRIPTION}.failed"]
            assert failed[-1]["item_id"] == committed["item_id"], events
    assert [(e["content_index"], e["error"]["code"]) for e in failed] == [
        (0, "deadline_exceeded")
    ] * 2


@pytest.mark.slow
def test_a_live_session_translates_on_a_multilingual_model(
    make_server: type[Server], tmp_path: Path, base_model: Path
) -> None:
    """The same Spanish telephone prompt ("Otros participantes en la conferencia"),
    transcribed then translated: Spanish text, then
    English (each closer to its own reference than to the other)."""
    env = {
        "ASRSERVE_MODELS": "base",
        "ASRSERVE_MODEL_CACHE_DIR": str(MODEL_CACHE),
        "ASRSERVE_OFFLINE": "1",
    }
    server = make_server(tmp_path / "data", env=env)
    server.start(timeout=180.0)
    [clip] = [p for p in prompts(6, ("es",)) if p.path.name == "conf-otherinparty.wav"]
    speech = pcm16(decode(clip.path, 60), 24000)
    heard = {}
    for task in ("transcribe", "translate"):
        with connect(server) as connection:
            receive(connection)
            transcription = {"model": "base", "language": "es", "task": task}
            audio_input = {"transcription": transcription, "turn_detection": None}
            update(connection, audio_input, [])
            shown = receive(connection)["session"]["audio"]["input"]["transcription"]
            assert shown["task"] == task
            send_audio(connection, speech, 24000, 2)
            connection.input_audio_buffer.commit()
            events = settle(connection)
            [done] = [e for e in events if e["type"] == f"{TRANSCRIPTION}.completed"]
            heard[task] = done["transcript"]
    spanish, english = [clip.text], [clip.english]
    assert wer(spanish, [heard["transcribe"]]) < wer(english, [heard["transcribe"]]), heard
    assert wer(english, [heard["translate"]]) < wer(spanish, [heard["translate"]]), heard
    assert wer(english, [heard["translate"]]) <= 0.5, heard


@pytest.mark.slow
def test_the_first_event_is_in_the_shape_the_client_asks_for(server: Server) -> None:
    """OpenAI's beta clients ask for the beta shape with a subprotocol (in browsers) or the
    ``OpenAI-Beta: realtime=v1`` header (tests/test_live.py); other clients are greeted in
    the GA shape, and answered in the beta one once they speak it."""
    url = server.url.replace("http://", "ws://") + "/v1/realtime?intent=transcription"
    beta = [Subprotocol("realtime"), Subprotocol("openai-beta.realtime-v1")]
    with ws_connect(url, subprotocols=beta, open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "transcription_session.created"
    with ws_connect(url, open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "session.created"
        update = {"input_audio_format": "g711_ulaw"}
        ws.send(json.dumps({"type": "transcription_session.update", "session": update}))
        updated = json.loads(ws.recv(timeout=10))
        assert updated["type"] == "transcription_session.updated"
        assert updated["session"]["input_audio_format"] == "g711_ulaw"
