"""The live bench's word-level view of a session: when each spoken word was first shown.

A word's lag runs from the end of the word in the audio the session fed (its word timestamp
in a whole-file decode of each clip, placed at the clip's offset in the session's audio) to
the arrival of the first delta that held it. The shown words (the deltas' words, in order)
are lined up with the spoken ones (:class:`difflib.SequenceMatcher` on normalised words);
a word heard differently live than in the file decode lines up with nothing and has no lag.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from asrserve.bench.wer import normalize


@dataclass(frozen=True)
class SpokenWord:
    word: str
    end: float  # seconds into the session's audio


def spoken_words(words: list[dict[str, Any]], offset: float) -> list[SpokenWord]:
    """A clip's words (``verbose_json``'s ``words``) placed ``offset`` s into a session."""
    return [SpokenWord(w["word"], offset + float(w["end"])) for w in words]


def _keys(words: list[str]) -> list[str]:
    return [normalize(word) or word for word in words]


def word_lags(shown: list[tuple[float, str]], spoken: list[SpokenWord]) -> list[float]:
    """Seconds from each spoken word's end to the first delta that held it; ``shown`` is
    the deltas in arrival order, each as (seconds since the session's audio began, text)."""
    arrivals = [(at, word) for at, text in shown for word in text.split()]
    matcher = SequenceMatcher(
        a=_keys([word for _, word in arrivals]), b=_keys([w.word for w in spoken]), autojunk=False
    )
    return [
        arrivals[block.a + i][0] - spoken[block.b + i].end
        for block in matcher.get_matching_blocks()
        for i in range(block.size)
    ]
