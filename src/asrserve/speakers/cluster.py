"""Speakers from voice embeddings: which clips of a file one person said, over the whole
file, in memory that grows with the file's length, not its square.

Agglomerative clustering with average linkage on cosine similarity: every clip starts as
its own speaker, and the two speakers whose clips are most alike on average merge, until
no two are at least ``LINK`` alike. The nearest-neighbour chain finds the same merges in
O(n²) time for n groups (average linkage is reducible). A long file is clustered in two
stages, so that no step holds more than ``WINDOW`` clips' similarities: each window of
clips, as its embeddings arrive, is merged while its groups are at least ``FIRST_LINK``
alike (stricter: these merges are ones the whole-file clustering makes too, by far the most
often); then the groups of every window are merged together. Average linkage between two
groups is the dot product of their clips' mean unit vectors, so the second stage is exact
average linkage over the first stage's groups (n/WINDOW times fewer items). A file of at
most ``WINDOW`` clips is clustered in one stage. A speaker of fewer than ``MIN_CLIPS``
clips (a cough, a laugh) joins the speaker its clip is most alike. ``min_speakers`` and
``max_speakers`` bound the count together: where the threshold's count is outside them, the
merges stop at exactly the nearest bound (the dendrogram cut at that many speakers), as far
as the clips allow.
Pure numpy, deterministic.

``LINK`` was chosen on the tuning speakers' conversations (``bench/voices.py``: 40 without
overlap and 40 with, seeds 0-39; never the gating speakers): among 0.30-0.50, 0.35 gave
the lowest DER at collar 0 (0.054 and 0.055) with the count right in 37 and 39 of 40
(``scripts/tune_diarization.py``; docs/logs/diarization-tuning.log). ``FIRST_LINK``: on
four 20-minute meetings of the tuning speakers (several windows of clips each), every
value from 0.45 to 0.70 gave exactly the one-pass clustering's DER (0.0557 at collar 0)
and counts (``--long 4``; docs/logs/diarization-tuning-long.log); 0.55 is the middle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

LINK = 0.35  # the least average cosine similarity at which two speakers are one
FIRST_LINK = 0.55  # within a window of a long file's clips
WINDOW = 256  # clips a first-stage step holds at once
MIN_CLIPS = 2  # a speaker of fewer clips joins the most alike one

Floats = npt.NDArray[np.float32]
Labels = npt.NDArray[np.int64]
Matrix = npt.NDArray[np.float64]


def _unit(x: npt.NDArray[np.floating]) -> Matrix:
    values = np.asarray(x, dtype=np.float64)
    unit: Matrix = values / np.maximum(np.linalg.norm(values, axis=-1, keepdims=True), 1e-12)
    return unit


def cosine(a: npt.NDArray[np.floating], b: npt.NDArray[np.floating]) -> Matrix:
    return _unit(a) @ _unit(b).T


@dataclass
class Clustering:
    """One file's clustering, fed its embeddings in order (:meth:`add`, each call a short
    step) and concluded by :meth:`finish`."""

    window: int = WINDOW
    _means: list[Matrix] = field(default_factory=list)  # per group: its clips' mean unit vector
    _sizes: list[int] = field(default_factory=list)
    _group_of: list[npt.NDArray[np.int64]] = field(default_factory=list)  # per clip
    _pending: list[Matrix] = field(default_factory=list)  # unit vectors not yet grouped

    def add(self, embeddings: npt.NDArray[np.floating]) -> None:
        """More clips' embeddings, in the file's order: each full window is grouped."""
        self._pending += list(_unit(embeddings))
        while len(self._pending) >= 2 * self.window:  # keep the last window for finish
            self._group(self._pending[: self.window])
            self._pending = self._pending[self.window :]

    def _group(self, vectors: list[Matrix]) -> None:
        units = np.stack(vectors)
        merges = _dendrogram(units @ units.T, np.ones(len(units)))
        labels = _cut(len(units), [m for m in merges if m[0] >= FIRST_LINK])
        names, index = np.unique(labels, return_inverse=True)
        first = len(self._sizes)
        for name in range(len(names)):
            members = units[index == name]
            self._means.append(members.mean(axis=0))
            self._sizes.append(len(members))
        self._group_of.append(index.astype(np.int64) + first)

    def finish(self, min_speakers: int = 1, max_speakers: int = 15) -> Labels:
        """A speaker index per clip, 0, 1, … in order of first appearance; as many speakers
        as the embeddings say, within ``min_speakers``-``max_speakers`` where they allow."""
        if self._pending:
            if self._sizes:  # a long file: its last window grouped too
                self._group(self._pending)
            else:  # a short one: every clip is a group of its own (one exact stage)
                self._means, self._sizes = list(self._pending), [1] * len(self._pending)
                self._group_of.append(np.arange(len(self._pending), dtype=np.int64))
            self._pending = []
        if not self._sizes:
            return np.zeros(0, dtype=np.int64)
        means, sizes = np.stack(self._means), np.asarray(self._sizes, dtype=np.float64)
        merges = _dendrogram(means @ means.T, sizes)
        groups = len(sizes)
        labels = _absorb_small(_cut(groups, [m for m in merges if m[0] >= LINK]), means, sizes)
        found = len(np.unique(labels))
        wanted = min(max(found, min_speakers), max_speakers, groups)
        if wanted != found:  # outside the hints: exactly the nearest bound
            labels = _cut(groups, merges[: groups - wanted])
        return _in_order(labels[np.concatenate(self._group_of)])


def cluster(
    embeddings: npt.NDArray[np.floating], min_speakers: int = 1, max_speakers: int = 15
) -> Labels:
    """:class:`Clustering` of ``embeddings`` at once."""
    clustering = Clustering()
    clustering.add(embeddings)
    return clustering.finish(min_speakers, max_speakers)


Merge = tuple[float, int, int]  # (average similarity, one group, the other)


def _dendrogram(similarity: Matrix, sizes: npt.NDArray[np.float64]) -> list[Merge]:
    """Every merge of average linkage over groups (``sizes`` clips each), the most alike
    first: the nearest-neighbour chain's merges, sorted (average linkage is reducible, so
    a prefix of them is the clustering at that similarity)."""
    count = len(similarity)
    link = similarity.copy()
    np.fill_diagonal(link, -np.inf)
    sizes = sizes.astype(np.float64).copy()
    open_ = np.ones(count, dtype=bool)  # not yet merged into another
    chain: list[int] = []
    merges: list[Merge] = []
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
        merges.append((float(row[b]), a, b))
        merged = (link[a] * sizes[a] + link[b] * sizes[b]) / (sizes[a] + sizes[b])
        link[a, :], link[:, a] = merged, merged
        link[a, a] = -np.inf
        sizes[a] += sizes[b]
        open_[b] = False
        link[b, :], link[:, b] = -np.inf, -np.inf
    return sorted(merges, key=lambda merge: -merge[0])


def _cut(count: int, merges: list[Merge]) -> Labels:
    """The groups' clusters after ``merges`` (a union-find over the groups)."""
    parent = list(range(count))

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for _, a, b in merges:
        parent[root(b)] = root(a)
    return np.array([root(index) for index in range(count)], dtype=np.int64)


def _absorb_small(labels: Labels, means: Matrix, sizes: npt.NDArray[np.float64]) -> Labels:
    """Groups whose speaker has fewer than MIN_CLIPS clips join the most alike speaker (on
    average over its clips: the dot product of mean unit vectors)."""
    names = np.unique(labels)
    clips = np.array([sizes[labels == name].sum() for name in names])
    big = names[clips >= MIN_CLIPS]
    if len(big) == 0 or len(big) == len(names):
        return labels
    centroids = np.stack(
        [
            (means[labels == name] * sizes[labels == name, None]).sum(axis=0)
            / sizes[labels == name].sum()
            for name in big
        ]
    )
    out = labels.copy()
    for index in np.flatnonzero(~np.isin(labels, big)):
        out[index] = big[int(np.argmax(centroids @ means[index]))]
    return out


def _in_order(labels: Labels) -> Labels:
    order: dict[int, int] = {}
    for label in labels.tolist():
        order.setdefault(label, len(order))
    return np.array([order[label] for label in labels.tolist()], dtype=np.int64)
