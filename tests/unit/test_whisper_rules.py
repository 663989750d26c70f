"""Whisper's engine-neutral rules, piece by piece: segments cut at timestamp pairs, tokens
aligned to frames by dynamic time warping, words timed and tidied, and the rules on the next
token's logits (PyTorch, on the CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asrserve.engine.alignment import dtw, median_filter, token_starts
from asrserve.engine.pytorch.rules import TimestampRules, Vocabulary
from asrserve.engine.timestamps import Piece, finished, split
from asrserve.engine.words import Timed, join_punctuation, place

T = 100  # the first timestamp token of these tests: <|0.00|>, then one each 20 ms


def test_a_pair_of_timestamps_closes_one_segment_and_opens_the_next() -> None:
    tokens = [T, 1, 2, T + 50, T + 50, 3, T + 100]  # ends on a single timestamp: finished
    assert finished(tokens, T)
    assert split(tokens, T, offset=10.0, duration=30.0) == [
        Piece(10.0, 11.0, [T, 1, 2, T + 50]),
        Piece(11.0, 12.0, [T + 50, 3, T + 100]),
    ]


def test_unclosed_text_after_the_last_pair_is_dropped() -> None:
    tokens = [T, 1, T + 50, T + 50, 3, 4]
    assert not finished(tokens, T)
    assert split(tokens, T, offset=0.0, duration=30.0) == [Piece(0.0, 1.0, [T, 1, T + 50])]


def test_a_decode_without_a_pair_is_one_segment_to_its_last_timestamp() -> None:
    assert split([T, 1, 2, T + 25], T, 5.0, 30.0) == [Piece(5.0, 5.5, [T, 1, 2, T + 25])]
    assert split([T, 1, 2], T, 5.0, 7.0) == [Piece(5.0, 12.0, [T, 1, 2])]


def test_time_warping_follows_the_cheap_cells() -> None:
    cost = np.full((3, 5), 9.0)
    for row, column in [(0, 0), (0, 1), (1, 2), (2, 3), (2, 4)]:
        cost[row, column] = 0.0
    rows, columns = dtw(cost)
    assert list(zip(rows.tolist(), columns.tolist(), strict=True)) == [
        (0, 0),
        (0, 1),
        (1, 2),
        (2, 3),
        (2, 4),
    ]


def test_token_starts_are_where_the_path_enters_each_row() -> None:
    matrix = np.full((3, 6), -5.0)
    matrix[0, :2] = matrix[1, 2:4] = matrix[2, 4:] = 1.0  # attention along a diagonal band
    assert token_starts(matrix).tolist() == [0.0, 2 / 50, 4 / 50]


def test_the_median_filter_reflects_at_the_ends() -> None:
    x = np.array([[5.0, 1.0, 2.0, 9.0, 3.0]])
    assert median_filter(x, 3).tolist() == [[1.0, 2.0, 2.0, 3.0, 9.0]]


def _word(word: str, start: float, end: float, tokens: int = 1) -> Timed:
    return Timed(word, list(range(tokens)), start, end, 0.9)


def test_marks_join_the_word_they_belong_to() -> None:
    words = [_word(" “", 0, 0.1), _word(" (", 0.1, 0.2), _word("Yes", 0.2, 0.5)]
    words += [_word(",", 0.5, 0.6), _word(".", 0.6, 0.7)]
    joined = join_punctuation(words)
    assert [w.word for w in joined] == ["", "", " “ (Yes,.", "", ""]
    assert len(joined[2].tokens) == 5


def test_words_are_dealt_to_their_segments_on_the_job_clock() -> None:
    words = [_word(" Hello", 0.0, 0.4), _word(" world", 0.4, 0.8), _word(" again", 1.2, 1.6)]
    placed, last = place([(0.0, 0.8, 2), (1.2, 1.6, 1)], words, offset=10.0, last_speech=10.0)
    assert [[w.word for w in p.words] for p in placed] == [[" Hello", " world"], [" again"]]
    assert [(w.start, w.end) for w in placed[1].words] == [(11.2, 11.6)]
    assert (placed[0].start, placed[0].end) == (10.0, 10.8)
    assert last == 11.6


VOCABULARY = Vocabulary(
    size=T + 200,
    eot=90,
    no_timestamps=99,
    timestamp_begin=T,
    no_speech=98,
    suppress=(5, *range(91, 99)),  # a text token, and the specials between text and times
    suppress_begin=(7, 90),
)


def _allowed(history: list[list[int]], logits: torch.Tensor | None = None) -> list[set[int]]:
    rules = TimestampRules(VOCABULARY, torch.device("cpu"))
    if logits is None:
        logits = torch.zeros((len(history), VOCABULARY.size))
    out = rules.apply(logits, history)
    return [set(torch.nonzero(~torch.isneginf(row)).flatten().tolist()) for row in out]


def test_the_first_token_is_a_timestamp_within_a_second() -> None:
    [first] = _allowed([[]])
    assert first == set(range(T, T + 51))


def test_after_a_lone_timestamp_comes_its_pair_or_the_end_and_never_an_earlier_time() -> None:
    logits = torch.zeros((1, VOCABULARY.size))
    logits[0, VOCABULARY.eot] = 10.0  # likelier than the timestamps together: not forced out
    [after] = _allowed([[T, 3, T + 40]], logits)
    assert after == {VOCABULARY.eot} | set(range(T + 40, VOCABULARY.size))


def test_after_a_pair_comes_text() -> None:
    [after] = _allowed([[T, 3, T + 40, T + 40]])
    assert T + 41 not in after and 3 in after and VOCABULARY.no_timestamps not in after
    assert 5 not in after  # suppressed always


def test_a_timestamp_is_forced_where_the_timestamps_together_are_likelier() -> None:
    logits = torch.full((1, VOCABULARY.size), -10.0)
    logits[0, 3] = 0.0  # the likeliest single token is text...
    logits[0, T + 50 :] = -1.0  # ...but the timestamps together outweigh it
    [after] = _allowed([[T, 3]], logits)
    assert after == set(range(T, VOCABULARY.size))


@pytest.mark.parametrize("history", [[T, 3, 4], [T, 3, T + 40, T + 40, 5]])
def test_timestamps_never_go_back(history: list[int]) -> None:
    [after] = _allowed([history])
    latest = max(t for t in history if t >= T)
    assert not any(T <= token < latest for token in after)
