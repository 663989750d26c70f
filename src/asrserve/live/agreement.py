"""Interim text that never has to be taken back: of two successive decodes of a growing
turn, the words they agree on from the start are final enough to show (the local-agreement
rule of streaming Whisper); each delta adds the words agreed beyond those already sent.

Words agree when they differ only in case and punctuation ("cancelled." and "cancelled,":
a growing turn moves the sentence's end). A decode with no words (an interim whose text
failed Whisper's thresholds comes back empty) is no hypothesis: the one before it stays the
one the next decode is compared with.

What was sent stays: the turn's completed text starts with it (:func:`completed`), and
the final decode adds only the words it heard after those."""

from __future__ import annotations

# Where the sent words are looked for in the final decode: its first words, as many as were
# sent and this many more (a final decode may split or insert a few words the interims did
# not).
ALIGN_SLACK = 3


def _key(word: str) -> str:
    return "".join(ch for ch in word.lower() if ch.isalnum()) or word


class Agreement:
    def __init__(self, hold_after: int | None = None) -> None:
        self._previous: list[str] = []
        self._previous_end = 0
        self._sent = 0
        self.sent = ""  # the deltas so far, joined
        # Words the session must not show yet: those of audio past this sample (a long
        # turn is about to be cut before it, and what is shown belongs to this turn).
        self.hold_after = hold_after

    def delta(self, text: str, end: int = 0) -> str:
        """What to add to the shown text after a decode of the turn's audio up to sample
        ``end`` that read ``text`` ("" if nothing)."""
        words = text.split()
        if not words:
            return ""
        agreed = 0
        for mine, theirs in zip(self._previous, words, strict=False):
            if _key(mine) != _key(theirs):
                break
            agreed += 1
        # the agreed words were heard in both decodes: in the audio of the earlier one
        held = self.hold_after is not None and self._previous_end > self.hold_after
        self._previous, self._previous_end = words, end
        if agreed <= self._sent or held:
            return ""
        piece = " ".join(words[self._sent : agreed])
        prefix = " " if self._sent else ""
        self._sent = agreed
        self.sent += prefix + piece
        return prefix + piece


def completed(sent: str, final: str) -> str:
    """A turn's completed text: the words sent as its deltas (``sent``), then the final
    decode's words after those that line up with them: after the prefix of the final
    decode closest to the sent words (fewest words changed, added or left out; the longest
    of equals), so a sent word the final decode heard differently is not repeated."""
    shown, words = [_key(w) for w in sent.split()], final.split()
    if not shown:
        return final.strip()
    window = [_key(w) for w in words[: len(shown) + ALIGN_SLACK]]
    # edits[j]: the word edits between the sent words and the final decode's first j words
    edits = list(range(len(window) + 1))
    for i, mine in enumerate(shown, 1):
        row = [i]
        for j, theirs in enumerate(window, 1):
            row.append(min(edits[j] + 1, row[j - 1] + 1, edits[j - 1] + (mine != theirs)))
        edits = row
    skip = min(range(len(edits)), key=lambda j: (edits[j], -j))
    rest = words[skip:]
    return " ".join([sent, *rest]) if rest else sent
