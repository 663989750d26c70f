"""The parts of a live session that need no model: turn rules, interim agreement, the audio
buffer, input conversion and the session settings a client sends."""

from __future__ import annotations

import numpy as np
import pytest

from asrserve.audio.vad import WINDOW, SileroStream
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest
from asrserve.live import beta as live_config
from asrserve.live.agreement import Agreement, completed
from asrserve.live.audio import PcmInput
from asrserve.live.buffer import PcmBuffer
from asrserve.live.errors import LiveError
from asrserve.live.turns import (
    TRAIL_WINDOWS,
    Edge,
    TurnDetection,
    TurnDetector,
    TurnEdge,
    TurnRules,
    best_pause,
)


def edges(rules: TurnDetection, probabilities: list[float]) -> list[TurnEdge]:
    turns = TurnRules(rules)
    found = (turns.push(p) for p in probabilities)
    return [edge for edge in found if edge is not None]


def test_a_turn_starts_at_speech_and_stops_after_enough_silence() -> None:
    rules = TurnDetection(threshold=0.5, silence_duration_ms=96)  # 3 windows of 32 ms
    speech = [0.1, 0.9, 0.8, 0.2, 0.1, 0.7, 0.9, 0.1, 0.1, 0.1, 0.1]
    assert edges(rules, speech) == [
        TurnEdge(Edge.STARTED, 1 * WINDOW),
        # two quiet windows (3, 4) are a pause, not the end; 7, 8, 9 are
        TurnEdge(Edge.STOPPED, 7 * WINDOW),
    ]


def test_no_speech_makes_no_turn() -> None:
    assert edges(TurnDetection(), [0.49] * 100) == []


def test_agreed_words_go_out_once_and_never_change() -> None:
    agreement = Agreement()
    assert agreement.delta("the quick") == ""  # nothing to agree with yet
    assert agreement.delta("the quick brown") == "the quick"
    assert agreement.delta("the quick brown fox jumps") == " brown"
    assert agreement.delta("the quack brown fox jumps over") == ""  # disagrees early: holds
    # sent words stay sent: what is agreed beyond them goes out
    assert agreement.delta("the quack brown fox jumps over it") == " fox jumps over"
    assert agreement.delta("the quack brown fox jumps over it") == " it"


def test_words_agree_across_case_and_punctuation() -> None:
    agreement = Agreement()
    assert agreement.delta("The match was cancelled.") == ""
    assert agreement.delta("the match was cancelled, because") == "the match was cancelled,"


def test_an_empty_decode_leaves_the_hypothesis_it_follows() -> None:
    agreement = Agreement()
    assert agreement.delta("birds were") == ""
    assert agreement.delta("") == ""
    assert agreement.delta("birds were singing") == "birds were"


def test_words_of_audio_past_the_hold_wait() -> None:
    """A long turn is about to be cut before sample 1000: words agreed by decodes of audio
    past it may go to the next turn, so they are not shown in this one."""
    agreement = Agreement(hold_after=1000)
    assert agreement.delta("so we", end=800) == ""
    assert agreement.delta("so we went on", end=1000) == "so we"  # heard by 800 samples
    assert agreement.delta("so we went on and", end=1200) == " went on"  # heard by 1000
    assert agreement.delta("so we went on and on", end=1400) == ""  # heard by 1200: held
    assert agreement.sent == "so we went on"


@pytest.mark.parametrize(
    ("sent", "final", "text"),
    [
        # the final decode agrees and goes on: its words after the sent ones are added
        (
            "And so my fellow",
            "And so, my fellow Americans, ask not",
            "And so my fellow Americans, ask not",
        ),
        # it heard the first sent word differently: the sent word stays, nothing repeats
        (
            "Birds were singing",
            "Words were singing in the trees.",
            "Birds were singing in the trees.",
        ),
        # it heard the last sent word differently: its place is skipped
        ("my fellow American", "my fellow Americans, ask not", "my fellow American ask not"),
        # a common word further on is not taken for a sent one
        ("the cat", "A cat sat on the mat.", "the cat sat on the mat."),
        # it heard less than was sent: what was sent stays
        ("we choose to go", "We choose.", "we choose to go"),
        # nothing sent: the final decode's text
        ("", " Ask not. ", "Ask not."),
    ],
)
def test_the_completed_text_starts_with_the_sent_words(sent: str, final: str, text: str) -> None:
    assert completed(sent, final) == text


def test_a_long_turn_is_cut_at_its_quietest_stretch() -> None:
    speech = np.full(60, 0.9, dtype=np.float32)
    speech[20:23] = 0.05  # a 96 ms gap between words
    speech[40] = 0.01  # a lone quiet window inside a word: not a pause
    cut = best_pause(speech, first=100)
    assert cut == (100 + 21) * WINDOW + WINDOW // 2  # the middle of the gap


class ScriptedVad(SileroStream):
    """Speech probabilities from a script, one per whole window fed."""

    def __init__(self, probabilities: list[float]) -> None:
        self.script = probabilities

    def feed(self, audio: np.ndarray) -> np.ndarray:
        count = audio.shape[0] // WINDOW
        found, self.script = self.script[:count], self.script[count:]
        return np.array(found, dtype=np.float32)


def test_the_detector_finds_pauses_and_speech_by_session_sample() -> None:
    """More windows than the detector keeps: it still addresses them from the session's
    first sample, and looks only at those it kept."""
    windows = TRAIL_WINDOWS + 100
    script = [0.9] * windows
    script[windows - 20 : windows - 17] = [0.05] * 3  # a gap 20 windows before the end
    detector = TurnDetector(TurnDetection(), ScriptedVad(script))
    detector.feed(np.zeros(windows * WINDOW, dtype=np.float32))
    gap = windows - 20
    assert detector.pause((gap - 10) * WINDOW, (gap + 10) * WINDOW) == (gap + 1) * WINDOW + 256
    assert detector.pause(0, windows * WINDOW) == (gap + 1) * WINDOW + 256  # the kept ones
    assert detector.speech_since(gap * WINDOW) == (gap + 3) * WINDOW
    assert detector.speech_since(windows * WINDOW) is None  # nothing heard after the end


def test_a_detector_started_mid_session_counts_from_its_origin() -> None:
    """Turn detection switched on by an update, 7 s in and inside an open turn: its edges,
    pauses and speech are session samples, and the open turn's silence stops it."""
    origin = 7 * 16000
    script = [0.9] * 10 + [0.05] * 20 + [0.9] * 5
    detector = TurnDetector(TurnDetection(), ScriptedVad(script), origin, speaking=True)
    found = detector.feed(np.zeros(len(script) * WINDOW, dtype=np.float32))
    assert found == [
        TurnEdge(Edge.STOPPED, origin + 10 * WINDOW),  # no STARTED: the turn was open
        TurnEdge(Edge.STARTED, origin + 30 * WINDOW),
    ]
    assert detector.speech_since(origin + 11 * WINDOW) == origin + 30 * WINDOW
    # the first window whose neighbours are all quiet (10-14): the earliest of equals
    assert detector.pause(origin, origin + 30 * WINDOW) == origin + 12 * WINDOW + WINDOW // 2


def test_the_buffer_keeps_what_is_asked_for_by_index() -> None:
    pcm = PcmBuffer()
    pcm.append(np.arange(0, 10, dtype=np.float32))
    pcm.append(np.arange(10, 25, dtype=np.float32))
    assert (pcm.start, pcm.end) == (0, 25)
    pcm.drop_before(20)
    assert pcm.start == 20 and pcm.since(22).tolist() == [22, 23, 24]
    assert pcm.since(0).tolist() == [20, 21, 22, 23, 24]  # before the oldest: from it
    pcm.drop_before(25)
    assert pcm.since(0).size == 0 and pcm.end == 25


def test_24_khz_input_becomes_16_khz() -> None:
    pcm = PcmInput(24000)
    tone = (np.sin(np.arange(24000) * 2 * np.pi * 440 / 24000) * 8000).astype("<i2")
    out = [pcm.convert(tone[i : i + 2400].tobytes()) for i in range(0, 24000, 2400)]
    samples = np.concatenate(out)
    assert 15900 <= samples.shape[0] <= 16000  # the resampler holds a few back
    assert samples.dtype == np.float32 and 0.2 < float(np.abs(samples).max()) < 0.3


def test_bad_input_audio_is_refused() -> None:
    with pytest.raises(LiveError, match="even number of bytes"):
        PcmInput(16000).convert(b"\x00\x01\x02")
    with pytest.raises(LiveError, match="16000 or 24000"):
        PcmInput(44100)


def catalog() -> Catalog:
    info = ModelInfo(id="tiny.en", multilingual=False, default_beam_size=5)
    return Catalog.of([info])


def test_a_session_update_sets_what_it_names() -> None:
    start = live_config.default_config(catalog())
    assert start.input_rate == 24000 and start.turn_detection is not None
    update = {
        "input_audio_format": {"type": "audio/pcm", "rate": 16000},
        "input_audio_transcription": {"model": "whisper-1", "language": "en"},
        "turn_detection": {"type": "server_vad", "silence_duration_ms": 800},
    }
    new = live_config.updated(start, update, catalog())
    assert new.input_rate == 16000 and new.options.language == "en"
    assert new.turn_detection == TurnDetection(silence_duration_ms=800)
    view = live_config.view("sess_1", new)
    assert view["input_audio_format"] == {"type": "audio/pcm", "rate": 16000}
    assert view["turn_detection"]["silence_duration_ms"] == 800
    assert live_config.updated(new, {"turn_detection": None}, catalog()).turn_detection is None


@pytest.mark.parametrize(
    ("update", "param"),
    [
        ({"input_audio_format": "pcm8"}, "session.input_audio_format"),
        ({"turn_detection": {"type": "semantic_vad"}}, "session.turn_detection"),
        ({"turn_detection": {"threshold": 2}}, "session.turn_detection.threshold"),
        ({"input_audio_transcription": {"language": "de"}}, "language"),
        ({"input_audio_transcription": {"model": "large-v9"}}, "model"),
    ],
)
def test_a_bad_session_update_names_its_field(update: dict[str, object], param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        live_config.updated(live_config.default_config(catalog()), update, catalog())
    assert caught.value.param == param
