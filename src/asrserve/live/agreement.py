"""Interim text that never has to be taken back: of two successive decodes of a growing
turn, the words they agree on from the start are final enough to show (the local-agreement
rule of streaming Whisper); each delta adds the words agreed beyond those already sent.

Words agree when they differ only in case and punctuation ("cancelled." and "cancelled,":
a growing turn moves the sentence's end). A decode with no words (an interim whose text
failed Whisper's thresholds comes back empty) is no hypothesis: the one before it stays the
one the next decode is compared with."""

from __future__ import annotations


def _key(word: str) -> str:
    return "".join(ch for ch in word.lower() if ch.isalnum()) or word


class Agreement:
    def __init__(self) -> None:
        self._previous: list[str] = []
        self._sent = 0

    def delta(self, text: str) -> str:
        """What to add to the shown text after a decode that read ``text`` ("" if nothing)."""
        words = text.split()
        if not words:
            return ""
        agreed = 0
        for mine, theirs in zip(self._previous, words, strict=False):
            if _key(mine) != _key(theirs):
                break
            agreed += 1
        self._previous = words
        if agreed <= self._sent:
            return ""
        piece = " ".join(words[self._sent : agreed])
        prefix = " " if self._sent else ""
        self._sent = agreed
        return prefix + piece
