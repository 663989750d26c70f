"""A live session's protocol without a model: G.711 input, the GA and beta session settings a
client sends and the session it is shown, and the turn events, each checked against the
official ``openai`` client's types."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from openai.types.realtime import RealtimeTranscriptionSessionCreateRequest

from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.errors import DeadlineExceeded, InvalidRequest
from asrserve.live import beta, events, ga
from asrserve.live.audio import ALAW, ULAW, PcmInput
from asrserve.live.turns import TurnDetection
from asrserve.vocabulary import Task
from tests.support.g711 import encode
from tests.support.realtime_types import beta_event, ga_event


def test_g711_code_points_decode_as_the_standard_gives_them() -> None:
    # ITU-T G.711 (what audioop.ulaw2lin and alaw2lin gave): the extremes, both zeros
    # and a step of the first segment
    assert [int(ULAW[c]) for c in (0x00, 0x80, 0xFF, 0x7F, 0x70, 0xF0)] == [
        -32124,
        32124,
        0,
        0,
        -120,
        120,
    ]
    assert [int(ALAW[c]) for c in (0xD5, 0x55, 0xAA, 0x2A, 0x80, 0x00)] == [
        8,
        -8,
        32256,
        -32256,
        5504,
        -5504,
    ]
    # each law's 128 positive levels are distinct and ordered
    assert len(set(ULAW.tolist())) == 255 and len(set(ALAW.tolist())) == 256


@pytest.mark.parametrize("law", ["pcmu", "pcma"])
def test_8_khz_g711_input_becomes_16_khz(law: str) -> None:
    tone = np.sin(np.arange(8000) * 2 * np.pi * 440 / 8000) * 0.25
    coded = encode((tone * 32767).astype("<i2"), law)
    pcm = PcmInput(8000, law)
    assert pcm.seconds(len(coded)) == 1.0
    samples = np.concatenate([pcm.convert(coded[i : i + 800]) for i in range(0, 8000, 800)])
    assert 15900 <= samples.shape[0] <= 16000  # the resampler holds a few back
    assert 0.24 < float(np.abs(samples).max()) < 0.26


def catalog() -> Catalog:
    return Catalog.of(
        [
            ModelInfo(id="tiny.en", multilingual=False, default_beam_size=5),
            ModelInfo(id="base", multilingual=True, default_beam_size=5),
        ]
    )


GA_UPDATE: dict[str, Any] = {
    "type": "transcription",
    "audio": {
        "input": {
            "format": {"type": "audio/pcmu"},
            "transcription": {"model": "base", "language": "de", "task": "translate"},
            "noise_reduction": {"type": "far_field"},
            "turn_detection": {"type": "server_vad", "silence_duration_ms": 700},
        }
    },
    "include": ["item.input_audio_transcription.logprobs"],
}


def test_a_ga_session_update_sets_what_it_names_and_shows_it_in_the_ga_shape() -> None:
    config = ga.updated(beta.default_config(catalog()), GA_UPDATE, catalog())
    assert (config.input_rate, config.input_encoding) == (8000, "pcmu")
    assert (config.options.model, config.options.language) == ("base", "de")
    assert config.options.task is Task.TRANSLATE
    assert config.turn_detection == TurnDetection(silence_duration_ms=700)
    assert config.noise_reduction == {"type": "far_field"} and config.logprobs
    view = ga.view("sess_1", config)
    event = ga_event({"type": "session.updated", "event_id": "event_1", "session": view})
    session = event.session  # type: ignore[attr-defined]
    assert isinstance(session, RealtimeTranscriptionSessionCreateRequest)
    assert session.include == ["item.input_audio_transcription.logprobs"]
    shown = view["audio"]["input"]
    assert shown["format"] == {"type": "audio/pcmu"}
    assert shown["noise_reduction"] == {"type": "far_field"}  # as given, and not applied:
    assert view["ignored"] == ["audio.input.noise_reduction"]
    assert shown["transcription"]["task"] == "translate"
    # 16 kHz PCM, ours (OpenAI's GA type names 24 kHz only), is shown as set
    pcm16k = {"type": "audio/pcm", "rate": 16000}
    at16k = ga.updated(config, ga_input(format=pcm16k), catalog())
    assert ga.view("sess_1", at16k)["audio"]["input"]["format"] == pcm16k
    # a field left out keeps its value
    again = ga.updated(config, {"type": "transcription", "include": []}, catalog())
    assert again.options == config.options and not again.logprobs


def test_the_beta_update_takes_the_same_settings_by_its_names() -> None:
    update = {
        "input_audio_format": "g711_alaw",
        "input_audio_noise_reduction": {"type": "near_field"},
        "include": ["item.input_audio_transcription.logprobs"],
        "input_audio_transcription": {"prompt": "Kubernetes, kubectl"},
    }
    config = beta.updated(beta.default_config(catalog()), update, catalog())
    assert (config.input_rate, config.input_encoding) == (8000, "pcma")
    assert config.options.prompt == "Kubernetes, kubectl" and config.logprobs
    view = beta.view("sess_1", config)
    assert view["input_audio_format"] == "g711_alaw"
    assert view["input_audio_noise_reduction"] == {"type": "near_field"}
    assert view["ignored"] == ["input_audio_noise_reduction"]
    assert view["include"] == ["item.input_audio_transcription.logprobs"]
    assert view["input_audio_transcription"]["prompt"] == "Kubernetes, kubectl"


def ga_input(**fields: object) -> dict[str, object]:
    return {"type": "transcription", "audio": {"input": fields}}


@pytest.mark.parametrize(
    ("update", "param"),
    [
        ({"type": "realtime"}, "session.type"),
        (ga_input(format={"type": "audio/pcm", "rate": 44100}), "session.audio.input.format"),
        (ga_input(transcription={"task": "translate"}), "session.audio.input.transcription.task"),
        (ga_input(transcription={"task": "summarise"}), "session.audio.input.transcription.task"),
        (ga_input(transcription={"keywords": "x"}), "session.audio.input.transcription.keywords"),
        (ga_input(transcription={"delay": "low"}), "session.audio.input.transcription.delay"),
        (ga_input(transcription=None), "session.audio.input.transcription"),
        (ga_input(noise_reduction={"type": "loud"}), "session.audio.input.noise_reduction"),
        (ga_input(turn_detection={"type": "semantic_vad"}), "session.audio.input.turn_detection"),
        ({"type": "transcription", "include": ["logprobs"]}, "session.include"),
    ],
)
def test_a_bad_ga_update_names_its_field(update: dict[str, object], param: str) -> None:
    """(``translate`` on the English-only default model, tiny.en, names the task.)"""
    with pytest.raises(InvalidRequest) as caught:
        ga.updated(beta.default_config(catalog()), update, catalog())
    assert caught.value.param == param


def test_turn_events_are_the_clients_types_in_both_shapes() -> None:
    logprobs = [{"token": " ask", "logprob": -0.1, "bytes": [32, 97, 115, 107]}]
    turn = [
        {"type": "input_audio_buffer.committed", "item_id": "item_2", "previous_item_id": None},
        events.delta("item_2", "And so", 1800),
        events.delta("item_2", " my", 2800, logprobs),
        events.completed("item_2", "And so my fellow Americans", 2.5, logprobs),
        events.failed("item_3", DeadlineExceeded("no device could run the turn in time")),
        {"type": "input_audio_buffer.cleared"},
    ]
    for index, event in enumerate(turn):
        numbered = {"event_id": f"event_{index}", **event}
        assert ga_event(numbered).model_dump(exclude_unset=True) == numbered
        assert beta_event(numbered) is not None
    assert turn[3]["usage"] == {"type": "duration", "seconds": 2.5}
    assert "logprobs" not in turn[1] and turn[2]["logprobs"] == logprobs
    assert turn[4]["error"]["code"] == "deadline_exceeded"
