"""Serving owners in turn: the shared duties (the webhook sender, the Batch API runner)
serve one owner's item after another's, so that one with many waits on its own."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def round_robin(
    items: Sequence[T], owner: Callable[[T], K], rank: Callable[[K], int] = lambda _: 0
) -> list[T]:
    """One item of each owner in turn, each owner's in the order given; the owners by
    ``rank`` (lowest first), then in the order they first appear."""
    by_owner: dict[K, list[T]] = {}
    for item in items:
        by_owner.setdefault(owner(item), []).append(item)
    queues = sorted(by_owner.items(), key=lambda entry: rank(entry[0]))
    turns = itertools.zip_longest(*(queue for _, queue in queues))
    return [item for turn in turns for item in turn if item is not None]
