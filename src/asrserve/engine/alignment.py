"""Where each text token was said: Whisper's alignment of tokens to audio frames from its
cross-attention (engine-neutral; numpy).

An engine runs the decoder over a window's text once more and hands over the
cross-attention scores of the model's alignment heads (heads, tokens, frames, before their
softmax). As openai-whisper and CTranslate2 do: each head's scores are softmaxed over the
window's real frames, standardised across tokens, median-filtered along time (width 7) and
averaged over heads; dynamic time warping through the negated matrix gives each token's
first frame. Frames are 20 ms (the encoder's stride).
"""

from __future__ import annotations

import numpy as np

MEDIAN_FILTER_WIDTH = 7
FRAMES_PER_SECOND = 50  # encoder frames: the log-mel frames halved by the second convolution


def attention_matrix(scores: np.ndarray, frames: int) -> np.ndarray:
    """(tokens, frames) from the alignment heads' (heads, tokens, all frames) scores, over
    the first ``frames`` encoder frames."""
    weights = scores[:, :, :frames].astype(np.float64)
    weights = np.exp(weights - weights.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    mean = weights.mean(axis=-2, keepdims=True)
    std = weights.std(axis=-2, keepdims=True)
    weights = (weights - mean) / np.where(std > 0, std, 1.0)
    filtered = median_filter(weights, MEDIAN_FILTER_WIDTH)
    matrix: np.ndarray = filtered.mean(axis=0)
    return matrix


def median_filter(x: np.ndarray, width: int) -> np.ndarray:
    """The median over ``width`` neighbours along the last axis, reflected at the ends."""
    half = width // 2
    if x.shape[-1] <= half:
        return x
    pad = [(0, 0)] * (x.ndim - 1) + [(half, half)]
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x, pad, mode="reflect"), width, -1)
    out: np.ndarray = np.median(windows, axis=-1)
    return out


def dtw(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cheapest monotonic path through ``cost`` (rows, columns) from its first cell to
    its last, stepping down, right or both: the rows' and columns' indices along it. Cells
    of one anti-diagonal depend only on the two before it, so each diagonal is one step."""
    rows, columns = cost.shape
    total = np.full((rows + 1, columns + 1), np.inf)
    total[0, 0] = 0.0
    trace = np.zeros((rows + 1, columns + 1), dtype=np.int8)
    trace[0, :] = 2
    trace[:, 0] = 1
    for diagonal in range(2, rows + columns + 1):
        i = np.arange(max(1, diagonal - columns), min(rows, diagonal - 1) + 1)
        j = diagonal - i
        both, up, left = total[i - 1, j - 1], total[i - 1, j], total[i, j - 1]
        step = np.where((both < up) & (both < left), 0, np.where((up < both) & (up < left), 1, 2))
        best = np.choose(step, [both, up, left])
        total[i, j] = cost[i - 1, j - 1] + best
        trace[i, j] = step
    path_rows, path_columns = [], []
    i, j = rows, columns
    while i > 0 or j > 0:
        path_rows.append(i - 1)
        path_columns.append(j - 1)
        move = trace[i, j]
        if move == 0:
            i, j = i - 1, j - 1
        elif move == 1:
            i -= 1
        else:
            j -= 1
    return np.array(path_rows[::-1]), np.array(path_columns[::-1])


def token_starts(matrix: np.ndarray) -> np.ndarray:
    """Each row's first frame on the path (seconds): the text tokens' starts, then the
    end-of-text's (the last text token's end)."""
    text, time = dtw(-matrix)
    jumps = np.pad(np.diff(text), (1, 0), constant_values=1).astype(bool)
    starts: np.ndarray = time[jumps] / FRAMES_PER_SECOND
    return starts
