"""The engine seam: engines by name, what a model declares it supports, and Whisper's
decoding rules for a batch of windows driven through a scripted forward pass."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from asrserve.engine.base import ChunkInput, RawSegment
from asrserve.engine.decoding import (
    CONTEXT_TOKENS,
    MAX_PASSES,
    WindowOutput,
    context_tokens,
    decode_windows,
)
from asrserve.engine.registry import ENGINES, engine_kind
from asrserve.engine.whisper import whisper_capabilities
from asrserve.settings import Settings
from asrserve.settings import registered as names

SHORT = (5.0, 10.0, 30.0)


def test_an_unknown_engine_is_refused_naming_the_registered_ones() -> None:
    registered = "registered: auto, ctranslate2, transformers"
    with pytest.raises(ValidationError, match=f"unknown engine 'onnx'; {registered}"):
        Settings(engine="onnx")
    assert sorted(ENGINES) == sorted(names.ENGINES) == ["ctranslate2", "transformers"]


def test_the_engine_names_devices_and_picks_compute_types() -> None:
    kind = engine_kind(Settings(engine="ctranslate2", device="cuda", device_index=(0, 2)))
    assert kind.device_names(Settings(device="cuda", device_index=(0, 2)), 2) == [
        "cuda:0",
        "cuda:2",
    ]
    assert kind.device_names(Settings(device="cpu"), 3) == ["cpu:0", "cpu:1", "cpu:2"]
    assert [kind.compute_type(d, "default") for d in ("cpu", "cuda")] == ["int8", "float16"]
    assert kind.compute_type("cuda", "int8_float16") == "int8_float16"


def test_a_model_gets_the_windows_its_engine_takes() -> None:
    english, multilingual = whisper_capabilities(False), whisper_capabilities(True)
    assert english.windows(SHORT) == SHORT and english.languages == ("en",)
    assert multilingual.windows(SHORT) == (30.0,) and "de" in multilingual.languages


def _chunk(duration: float, offset: float = 0.0, context: str = "") -> ChunkInput:
    features = np.arange(80 * 3000, dtype=np.float32).reshape(80, 3000)
    return ChunkInput(features=features, offset=offset, duration=duration, context=context)


def _segment(start: float, end: float, tokens: list[int], no_speech: float = 0.1) -> RawSegment:
    return RawSegment(
        seek=0,
        start=start,
        end=end,
        text=f" {start:g}-{end:g}",
        tokens=tokens,
        avg_logprob=-1.5 if no_speech > 0.6 else -0.2,
        compression_ratio=1.2,
        no_speech_prob=no_speech,
        temperature=0.0,
        words=None,
    )


class ScriptedForward:
    """A forward pass that answers each window by its offset, and records what it ran."""

    def __init__(self, answers: dict[float, WindowOutput]) -> None:
        self.answers = answers
        self.calls: list[list[tuple[float, int]]] = []  # (offset, prompt length) per window

    def __call__(self, windows: list[ChunkInput], prompts: list[list[int]]) -> list[WindowOutput]:
        self.calls.append([(w.offset, len(p)) for w, p in zip(windows, prompts, strict=True)])
        return [self.answers[round(w.offset, 3)] for w in windows]


def test_an_unfinished_window_is_continued_after_its_last_segment() -> None:
    """Whisper stopped at 12 s of a 20 s window: the tail from 12 s is decoded as a window
    of its own, conditioned on the text before it, and its text follows."""
    forward = ScriptedForward(
        {
            0.0: WindowOutput([_segment(0.0, 12.0, [1, 2, 3])], False, False, spoken_to=12.0),
            12.0: WindowOutput([_segment(12.0, 20.0, [4])], True, False, spoken_to=20.0),
        }
    )
    [attempt] = decode_windows([_chunk(20.0)], [[]], forward, len, 0.0)
    assert [(s.start, s.end) for s in attempt.segments] == [(0.0, 12.0), (12.0, 20.0)]
    assert forward.calls == [[(0.0, 0)], [(12.0, 3)]]  # the tail is prompted with 1, 2, 3
    assert not attempt.truncated


def test_a_window_is_continued_where_its_decode_ended_not_where_its_words_did() -> None:
    """Word timing moved the last segment's end from 19.5 s to 12 s: the decode's own end
    (0.5 s before the window's) leaves no tail, so timing words never changes the text."""
    timed = WindowOutput([_segment(0.0, 12.0, [1, 2, 3])], False, False, spoken_to=19.5)
    forward = ScriptedForward({0.0: timed})
    [attempt] = decode_windows([_chunk(20.0)], [[]], forward, len, 0.0)
    assert (forward.calls, [s.end for s in attempt.segments]) == ([[(0.0, 0)]], [12.0])


def test_a_silent_window_is_skipped_and_a_truncated_one_is_marked() -> None:
    forward = ScriptedForward(
        {
            0.0: WindowOutput([_segment(0.0, 5.0, [9], no_speech=0.9)], True, False, 5.0),
            30.0: WindowOutput([_segment(30.0, 60.0, [7])], True, True, spoken_to=60.0),
        }
    )
    silent, loud = decode_windows(
        [_chunk(5.0), _chunk(30.0, offset=30.0)], [[], []], forward, len, 0.0
    )
    assert (silent.segments, [s.end for s in loud.segments], loud.truncated) == ([], [60.0], True)
    assert forward.calls == [[(0.0, 0), (30.0, 0)]]  # one pass: same prompt length


def test_windows_run_grouped_by_prompt_length_and_passes_are_bounded() -> None:
    """Windows with and without context are separate passes; a window that never finishes
    is continued at most MAX_PASSES - 1 times."""

    class NeverDone(ScriptedForward):
        def __call__(
            self, windows: list[ChunkInput], prompts: list[list[int]]
        ) -> list[WindowOutput]:
            self.calls.append([(w.offset, len(p)) for w, p in zip(windows, prompts, strict=True)])
            return [
                WindowOutput([_segment(w.offset, w.offset + 1.0, [1])], False, False, w.offset + 1)
                for w in windows
            ]

    forward = NeverDone({})
    decode_windows([_chunk(29.0), _chunk(29.0)], [[], [5, 6]], forward, len, 0.0)
    assert [len(call) for call in forward.calls[:2]] == [1, 1]  # two lengths, two passes
    assert len(forward.calls) == 2 * MAX_PASSES


def test_context_is_the_last_tokens_of_the_text_before() -> None:
    encode = lambda text: [ord(c) for c in text]  # noqa: E731
    assert context_tokens(encode, "  ") == []
    assert context_tokens(encode, "ab") == [ord(" "), ord("a"), ord("b")]
    assert len(context_tokens(encode, "x" * 100)) == CONTEXT_TOKENS
