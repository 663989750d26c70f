"""Word error rate (WER) helpers built on :mod:`jiwer`.

Both references and hypotheses are passed through :func:`normalize` before
scoring, so casing, punctuation and spacing differences never count as errors.
Accents are kept (in Spanish ``está`` and ``esta`` are different words), however they
are encoded, and ``¿``/``¡`` count as punctuation.
Number words are *not* mapped to digits (or vice versa): the synthetic corpus
in :mod:`asrserve.bench.corpus` deliberately contains no digits, so a transcript
that writes "9" for "nine" is counted as a substitution.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import jiwer

__all__ = ["normalize", "wer", "wer_one"]

# Apostrophe-like characters that NFKC does not fold into "'".
_APOSTROPHES = re.compile(r"['\u2018\u2019\u02bc\u0060\u00b4]")
# Anything that is not a letter/digit or whitespace (``\w`` includes "_").
_NON_WORD = re.compile(r"[^\w\s]|_")
_SPACES = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Normalize *text* for WER scoring.

    Steps, in order: Unicode NFKC (so a letter and its combining accent are one letter),
    case folding (lowercase, and German ``ß`` as ``ss``), delete apostrophes (so
    ``"Don't"`` becomes ``"dont"`` and ``"the dog's"`` becomes ``"the dogs"``),
    replace every other punctuation/symbol character with a space (so
    ``"well-known"`` becomes ``"well known"``), collapse runs of whitespace and
    strip the ends.
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _APOSTROPHES.sub("", text)
    text = _NON_WORD.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def wer(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Corpus-level WER: total edits divided by total reference words.

    Each pair is normalized with :func:`normalize` first. An empty hypothesis
    counts as deleting every reference word; words hypothesized for an empty
    reference count as insertions. Returns 0.0 for an empty list. If the
    references contain no words at all, returns 0.0 when the hypotheses are
    empty too and 1.0 otherwise (WER is undefined there).

    Raises:
        ValueError: if the two sequences differ in length.
    """
    if len(references) != len(hypotheses):
        raise ValueError(f"got {len(references)} references but {len(hypotheses)} hypotheses")
    if not references:
        return 0.0
    refs = [normalize(r) for r in references]
    hyps = [normalize(h) for h in hypotheses]
    out = jiwer.process_words(reference=refs, hypothesis=hyps)
    n_ref = out.hits + out.substitutions + out.deletions
    edits = out.substitutions + out.deletions + out.insertions
    if n_ref == 0:
        return 0.0 if edits == 0 else 1.0
    return float(edits) / float(n_ref)


def wer_one(reference: str, hypothesis: str) -> float:
    """WER of a single hypothesis against a single reference."""
    return wer([reference], [hypothesis])
