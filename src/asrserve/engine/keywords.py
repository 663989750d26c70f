"""Which decode of a window a request's keywords keep.

Keywords are a prompt (:func:`~asrserve.engine.decoding.conditioning`, faster-whisper's
``hotwords``), and a prompt changes more than the words it names: on real speech, six names
said nowhere moved tiny.en's other words as the same text given as ``prompt`` does
(docs/decoding.md#keywords). So a window with keywords is decoded twice on its one encoder
pass, with them and without them, and keeps the decode with them only where that decode
spells a keyword the other does not: keywords change a window's text only where they put a
keyword in it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_NOT_WORD = re.compile(r"[\W_]+")


def plain(text: str) -> str:
    """``text`` as words alone: case folded, each run of punctuation or space one space."""
    return " ".join(_NOT_WORD.sub(" ", text.casefold()).split())


def spelled(text: str, terms: Sequence[str]) -> frozenset[str]:
    """The terms that ``text`` spells as whole words (case, punctuation and spacing aside:
    ``Grafana's`` spells ``Grafana``, ``Grafanas`` does not)."""
    words = f" {plain(text)} "
    return frozenset(term for term in terms if (p := plain(term)) and f" {p} " in words)


def keeps_keywords(with_them: str, without_them: str, terms: Sequence[str]) -> bool:
    """Whether a window keeps its decode with the keywords: it spells one of ``terms`` that
    the decode without them does not."""
    return bool(spelled(with_them, terms) - spelled(without_them, terms))
