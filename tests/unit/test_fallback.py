"""Whisper's temperature fallback as rules (``engine.fallback``), on made-up decodes."""

from __future__ import annotations

import numpy as np
import pytest

from asrserve.engine.base import ChunkInput, Pause, RawSegment
from asrserve.engine.fallback import (
    TEMPERATURES,
    Attempt,
    FallbackCounts,
    best,
    decode_all,
    repeats_phrase,
    temperatures,
)


def _segment(text: str, logprob: float = -0.3, no_speech: float = 0.01) -> RawSegment:
    return RawSegment(
        seek=0,
        start=0.0,
        end=1.0,
        text=text,
        tokens=list(range(max(len(text.split()), 1))),
        avg_logprob=logprob,
        compression_ratio=1.0,
        no_speech_prob=no_speech,
        temperature=0.0,
        words=None,
    )


LOOP = "go home go home go home go home"


def _attempt(text: str, temperature: float = 0.0, **scores: float) -> Attempt:
    return Attempt([_segment(text, **scores)], temperature)


@pytest.mark.parametrize(
    "text",
    [
        "which are an exact imitation, which are an exact imitation, which are an exact imitation",
        "I will take you to Hamburg. I will take you to Hamburg.",
        "we go home we go home we go home we go home now",
        "the quick brown fox the quick brown fox jumps",
    ],
)
def test_a_repeated_phrase_is_a_loop(text: str) -> None:
    assert repeats_phrase(text)


@pytest.mark.parametrize(
    "text",
    [
        "And so my fellow Americans, ask not what your country can do for you, ask what you "
        "can do for your country.",
        "thank you, thank you",
        "no, no, no, I said no",
        # espeak-ng speech tiny.en decodes so (as faster-whisper's transcribe does); the
        # rules failed the first three before issue 45 (real speech repeats short phrases)
        "Well, I know. I know. I know. You told me so.",
        "I know, I know, I know.",
        "Thank you. Thank you. Thank you very much.",
        "No, no, no, no. I sent no.",
        "",
    ],
)
def test_ordinary_speech_is_not_a_loop(text: str) -> None:
    assert not repeats_phrase(text)


def test_the_ladder_is_faster_whispers_for_zero_and_one_temperature_otherwise() -> None:
    assert temperatures(0.0) == TEMPERATURES == (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    assert temperatures(0.7) == (0.7,)


def test_what_fails() -> None:
    assert not _attempt("a plain sentence").failed
    assert _attempt("a plain sentence", logprob=-1.2).failed
    # unlikely text in a window Whisper thinks is silent is silence, not a failure
    assert not _attempt("a plain sentence", logprob=-1.2, no_speech=0.9).failed
    assert _attempt("e-" * 60).failed  # compresses too well
    assert Attempt([_segment("a plain sentence")], 0.0, truncated=True).failed
    assert not Attempt([], 0.0).failed


def test_best_is_the_first_that_passes_else_the_likeliest_that_does_not_loop() -> None:
    loop = _attempt(LOOP, logprob=-0.1)
    unlikely = _attempt("a plain sentence", 0.2, logprob=-1.5)
    less_unlikely = _attempt("another plain sentence", 0.4, logprob=-1.2)
    good = _attempt("the right sentence", 0.6)
    assert best([loop, unlikely, good]) is good
    assert best([loop, unlikely, less_unlikely]) is less_unlikely
    assert best([loop]) is loop


def test_a_kept_decode_reports_its_temperature_and_scores_on_every_segment() -> None:
    attempt = Attempt([_segment("one two", -0.5), _segment("three four", -0.7)], 0.4)
    scored = attempt.scored()
    assert [s.temperature for s in scored] == [0.4, 0.4]
    assert [s.avg_logprob for s in scored] == [pytest.approx(-0.6)] * 2
    assert {s.compression_ratio for s in scored} == {attempt.compression_ratio}


class ScriptedDecoder:
    """Decodes each chunk (known by its offset) to the next text of its script."""

    def __init__(self, scripts: dict[int, list[str]]) -> None:
        self.scripts = scripts
        self.calls: list[tuple[list[int], float]] = []

    def __call__(self, chunks: list[ChunkInput], temperature: float) -> list[Attempt]:
        keys = [int(c.offset) for c in chunks]
        self.calls.append((keys, temperature))
        return [_attempt(self.scripts[key].pop(0), temperature) for key in keys]


def _keyed(index: int, frames: int = 3000, rescue: bool = True) -> ChunkInput:
    return ChunkInput(np.zeros((80, frames), np.float32), float(index), 1.0, rescue_loops=rescue)


def _widen(chunk: ChunkInput) -> ChunkInput | None:
    if chunk.features.shape[-1] >= 3000:
        return None
    return ChunkInput(np.zeros((80, 3000), np.float32), chunk.offset, chunk.duration)


def test_only_failed_windows_are_decoded_again_and_together() -> None:
    decoder = ScriptedDecoder({0: ["fine"], 1: [LOOP, "fixed"], 2: [LOOP, LOOP, "late"]})
    counts, early = FallbackCounts(), []
    chunks = [_keyed(0), _keyed(1), _keyed(2)]
    out = decode_all(
        chunks, TEMPERATURES, decoder, _widen, counts, lambda i, s: early.append((i, s[0].text))
    )
    assert decoder.calls == [([0, 1, 2], 0.0), ([1, 2], 0.2), ([2], 0.4)]
    # each settled as soon as its tries were over; the last one is the call's answer
    assert early == [(0, "fine"), (1, "fixed")]
    assert counts == FallbackCounts(windows=3, retried=2, decodes={0.0: 3, 0.2: 2, 0.4: 1})
    assert [[s.text for s in segments] for segments in out] == [["fine"], ["fixed"], ["late"]]
    assert [segments[0].temperature for segments in out] == [0.0, 0.2, 0.4]


def test_a_short_window_that_fails_is_tried_on_the_full_one_at_the_same_temperature() -> None:
    decoder = ScriptedDecoder({0: [LOOP, "whole"], 1: [LOOP, "sampled"]})
    out = decode_all([_keyed(0, 500), _keyed(1)], TEMPERATURES, decoder, _widen)
    assert decoder.calls == [([0, 1], 0.0), ([0], 0.0), ([1], 0.2)]
    assert [[s.text for s in segments] for segments in out] == [["whole"], ["sampled"]]


def test_when_every_temperature_fails_whispers_best_is_kept() -> None:
    decoder = ScriptedDecoder({0: [LOOP] * 6})
    out = decode_all([_keyed(0)], TEMPERATURES, decoder, _widen)
    assert [t for _, t in decoder.calls] == list(TEMPERATURES)
    assert [s.text for s in out[0]] == [LOOP]


def test_a_temperature_asked_for_is_the_only_one_tried() -> None:
    decoder = ScriptedDecoder({0: [LOOP]})
    decode_all([_keyed(0)], temperatures(0.3), decoder, _widen)
    assert decoder.calls == [([0], 0.3)]


def test_a_chunk_without_rescue_gets_one_try_and_no_text_if_it_loops() -> None:
    decoder = ScriptedDecoder({0: [LOOP], 1: ["fine"]})
    out = decode_all(
        [_keyed(0, 500, rescue=False), _keyed(1, 500, rescue=False)], TEMPERATURES, decoder, _widen
    )
    assert decoder.calls == [([0, 1], 0.0)]
    assert [[s.text for s in segments] for segments in out] == [[], ["fine"]]


class PauseAfter(Pause):
    """Due once ``passes`` passes have asked; keeps what it is handed."""

    def __init__(self, passes: int) -> None:
        self.asked, self.passes = 0, passes
        self.kept: dict[int, ChunkInput] = {}

    def due(self) -> bool:
        self.asked += 1
        return self.asked >= self.passes

    def keep(self, index: int, chunk: ChunkInput) -> None:
        self.kept[index] = chunk


def test_a_pause_between_passes_hands_back_windows_that_resume_where_they_stopped() -> None:
    decoder = ScriptedDecoder({0: ["fine"], 1: [LOOP, "fixed"], 2: [LOOP, LOOP, "late"]})
    counts, pause = FallbackCounts(), PauseAfter(1)
    first = decode_all(
        [_keyed(0), _keyed(1), _keyed(2)], TEMPERATURES, decoder, _widen, counts, pause=pause
    )
    assert [[s.text for s in segments] for segments in first] == [["fine"], [], []]
    assert sorted(pause.kept) == [1, 2]
    resumed = decode_all([pause.kept[1], pause.kept[2]], TEMPERATURES, decoder, _widen, counts)
    # the passes are those of one uninterrupted call, split where the pause came
    assert decoder.calls == [([0, 1, 2], 0.0), ([1, 2], 0.2), ([2], 0.4)]
    assert [[s.text for s in segments] for segments in resumed] == [["fixed"], ["late"]]
    assert counts == FallbackCounts(windows=3, retried=2, decodes={0.0: 3, 0.2: 2, 0.4: 1})


def test_a_resumed_window_keeps_whispers_best_of_all_its_tries() -> None:
    scores = [-0.875, -0.25, -0.5, -0.625, -0.75, -0.8125]  # all loop; the second scores best
    tries = [_attempt(LOOP, t, logprob=p) for t, p in zip(TEMPERATURES, scores, strict=True)]
    decoder = lambda chunks, t: [tries[TEMPERATURES.index(t)] for _ in chunks]  # noqa: E731
    pause = PauseAfter(3)
    decode_all([_keyed(0)], TEMPERATURES, decoder, _widen, pause=pause)
    [kept] = decode_all([pause.kept[0]], TEMPERATURES, decoder, _widen)
    assert pause.kept[0].rung == 3
    assert [(s.temperature, s.avg_logprob) for s in kept] == [(0.2, -0.25)]
