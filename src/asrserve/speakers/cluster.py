"""Speakers from voice embeddings: which clips of a file one person said, over the whole
file at once.

Agglomerative clustering with average linkage on cosine similarity: every clip starts as
its own speaker, and the two speakers whose clips are most alike on average merge, until
no two are at least ``LINK`` alike. The nearest-neighbour chain finds the same merges in
O(n²) time (average linkage is reducible: a merge never brings a third cluster closer than
the nearer of the two was), and a pair whose best match is under ``LINK`` is final. A
speaker of fewer than ``MIN_CLIPS`` clips (a clip the model heard poorly: a cough, a
laugh, two voices at once) joins the speaker its clip is most alike. The caller's hints
bound the count: outside them, the threshold moves (bisected) to the nearest one whose
count is within.
Pure numpy, deterministic.

``LINK`` was chosen on 40 conversations of ``bench/conversations.py`` (seeds 0–39, clips
every 0.75 s): among 0.40, 0.45 and 0.50 (and spectral clustering, which split speakers
more), 0.45 gave the lowest DER there, 0.010 with the right count in 38. With clips every
second (``turns.HOP_S``): 0.013 and 37 there, 0.015 and 39 on seeds 100–139, which the
tests and the bench use.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

LINK = 0.45  # the least average cosine similarity at which two speakers are one
MIN_CLIPS = 2  # a speaker of fewer clips joins the most alike one
BISECTIONS = 12  # steps of the threshold's search when the count is outside the hints

Floats = npt.NDArray[np.float32]
Labels = npt.NDArray[np.int64]


def _unit(x: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
    values = np.asarray(x, dtype=np.float64)
    unit: npt.NDArray[np.float64] = values / np.maximum(
        np.linalg.norm(values, axis=-1, keepdims=True), 1e-12
    )
    return unit


def cosine(a: npt.NDArray[np.floating], b: npt.NDArray[np.floating]) -> npt.NDArray[np.float64]:
    return _unit(a) @ _unit(b).T


def cluster(embeddings: Floats, min_speakers: int = 1, max_speakers: int = 15) -> Labels:
    """A speaker index per embedding, 0, 1, … in order of first appearance; as many
    speakers as the embeddings say, within ``min_speakers``–``max_speakers`` where they
    allow (never more speakers than embeddings)."""
    count = len(embeddings)
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    similarity = cosine(embeddings, embeddings)
    labels = _speakers(similarity, LINK)
    found = len(np.unique(labels))
    if found > max_speakers:  # the highest threshold that leaves at most max_speakers
        labels = _bisect(similarity, -1.0, LINK, lambda n: n <= max_speakers, labels)
    elif found < min(min_speakers, count):  # the lowest that gives at least min_speakers
        labels = _bisect(similarity, 1.0, LINK, lambda n: n >= min_speakers, labels)
    return _in_order(labels)


def _bisect(
    similarity: npt.NDArray[np.float64],
    good: float,
    bad: float,
    fits: Callable[[int], bool],
    labels: Labels,
) -> Labels:
    """The speakers at the threshold nearest ``bad`` (where the count does not fit) whose
    count ``fits``, searched from ``good`` (where it does)."""
    best = _speakers(similarity, good)
    for _ in range(BISECTIONS):
        middle = (good + bad) / 2
        found = _speakers(similarity, middle)
        if fits(len(np.unique(found))):
            good, best = middle, found
        else:
            bad = middle
    return best if fits(len(np.unique(best))) else labels


def _speakers(similarity: npt.NDArray[np.float64], threshold: float) -> Labels:
    return _absorb_small(_linkage(similarity, threshold), similarity)


def _linkage(similarity: npt.NDArray[np.float64], threshold: float) -> Labels:
    """Average-linkage clusters whose merges were all at least ``threshold`` alike."""
    count = len(similarity)
    link = similarity.copy()
    np.fill_diagonal(link, -np.inf)
    sizes = np.ones(count)
    labels = np.arange(count, dtype=np.int64)
    open_ = np.ones(count, dtype=bool)  # may still merge
    chain: list[int] = []
    while open_.sum() > 1:
        if not chain:
            chain.append(int(np.flatnonzero(open_)[0]))
        a = chain[-1]
        row = np.where(open_, link[a], -np.inf)
        row[a] = -np.inf
        b = int(np.argmax(row))
        if len(chain) > 1 and row[chain[-2]] >= row[b]:
            b = chain[-2]  # ties go back down the chain, so it ends
        if len(chain) < 2 or b != chain[-2]:
            chain.append(b)
            continue
        chain.pop()
        chain.pop()
        if row[b] < threshold:  # each is the other's best: neither merges any more
            open_[a] = open_[b] = False
            continue
        merged = (link[a] * sizes[a] + link[b] * sizes[b]) / (sizes[a] + sizes[b])
        link[a, :], link[:, a] = merged, merged
        link[a, a] = -np.inf
        sizes[a] += sizes[b]
        open_[b] = False
        link[b, :], link[:, b] = -np.inf, -np.inf
        labels[labels == b] = a
    return labels


def _absorb_small(labels: Labels, similarity: npt.NDArray[np.float64]) -> Labels:
    names, sizes = np.unique(labels, return_counts=True)
    big = names[sizes >= MIN_CLIPS]
    if len(big) == 0 or len(big) == len(names):
        return labels
    out = labels.copy()
    for index in np.flatnonzero(~np.isin(labels, big)):
        affinity = [similarity[index, labels == name].mean() for name in big]
        out[index] = big[int(np.argmax(affinity))]
    return out


def _in_order(labels: Labels) -> Labels:
    order: dict[int, int] = {}
    for label in labels.tolist():
        order.setdefault(label, len(order))
    return np.array([order[label] for label in labels.tolist()], dtype=np.int64)
