"""Server-side turn detection (OpenAI's ``server_vad``): where a speaker's turn starts and
where it stops, from Silero VAD's speech probability of each 32 ms window.

A turn starts at the first window whose probability reaches ``threshold``; its audio begins
``prefix_padding_ms`` before that. It stops once ``silence_duration_ms`` of windows in a row
fall below it; its audio ends where that silence ends (Whisper closes its last segment better
with a little silence after the words). :class:`TurnRules` is the pure part, one probability
at a time; :class:`TurnDetector` feeds it from the audio.

A turn that goes on past its longest (a speaker who never pauses for
``silence_duration_ms``) is cut at its best pause: :func:`best_pause`, the point of the
lowest speech probability in the last seconds before the limit.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from asrserve.audio.vad import WINDOW, SileroStream
from asrserve.engine.base import SAMPLING_RATE

# A window's quiet is judged over 160 ms around it, itself weighing most: a gap between words
PAUSE_KERNEL = np.array([1.0, 2.0, 3.0, 2.0, 1.0]) / 9.0
TRAIL_WINDOWS = 30 * SAMPLING_RATE // WINDOW  # the probabilities kept: one window's worth


@dataclass(frozen=True)
class TurnDetection:
    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500

    @property
    def prefix_samples(self) -> int:
        return SAMPLING_RATE * self.prefix_padding_ms // 1000


class Edge(StrEnum):
    STARTED = "started"
    STOPPED = "stopped"


@dataclass(frozen=True)
class TurnEdge:
    edge: Edge
    at: int  # samples since the session's audio began: speech start, or speech end


class TurnRules:
    def __init__(self, rules: TurnDetection, speaking: bool = False) -> None:
        self.speaking = speaking
        self._windows = 0
        self._quiet = 0  # windows in a row below the threshold while speaking
        self.retune(rules)

    def retune(self, rules: TurnDetection) -> None:
        """Go on under new rules: whether speech is on, and the windows counted, stay."""
        self.rules = rules
        self._needed = max(1, -(-rules.silence_duration_ms * SAMPLING_RATE // 1000 // WINDOW))

    def push(self, probability: float) -> TurnEdge | None:
        """The edge this window makes, if any."""
        at = self._windows * WINDOW
        self._windows += 1
        speech = probability >= self.rules.threshold
        if not self.speaking:
            if speech:
                self.speaking, self._quiet = True, 0
                return TurnEdge(Edge.STARTED, at)
            return None
        if speech:
            self._quiet = 0
            return None
        self._quiet += 1
        if self._quiet < self._needed:
            return None
        self.speaking = False
        return TurnEdge(Edge.STOPPED, at + WINDOW - self._quiet * WINDOW)


def best_pause(probabilities: np.ndarray, first: int) -> int:
    """The sample at the middle of the quietest window of ``probabilities`` (one per
    window, the first being window ``first`` of the session), each judged with its
    neighbours (:data:`PAUSE_KERNEL`: a lone quiet window inside a word is no pause, and of
    a gap the middle wins); the earliest of equals."""
    if probabilities.shape[0] < PAUSE_KERNEL.shape[0]:
        quietest = int(np.argmin(probabilities))
    else:
        means = np.convolve(probabilities, PAUSE_KERNEL, mode="valid")
        quietest = int(np.argmin(means)) + PAUSE_KERNEL.shape[0] // 2
    return (first + quietest) * WINDOW + WINDOW // 2


class TurnDetector:
    """Audio in, turn edges out (the model runs in the caller's thread). Samples are counted
    from the session's first: a detector started later (turn detection switched on by an
    update) is told where its audio begins (``origin``), and whether a turn is open then."""

    def __init__(
        self,
        rules: TurnDetection,
        stream: SileroStream | None = None,
        origin: int = 0,
        speaking: bool = False,
    ) -> None:
        self._stream = stream or SileroStream()
        self._rules = TurnRules(rules, speaking)
        self._trail: deque[float] = deque(maxlen=TRAIL_WINDOWS)  # the latest probabilities
        self._windows = 0  # windows seen: the trail ends with window ``_windows - 1``
        self._origin = origin  # the session sample this detector's first window starts at

    @property
    def speaking(self) -> bool:
        return self._rules.speaking

    def retune(self, rules: TurnDetection) -> None:
        """New rules from a session update: the model's state, the open turn and the
        session's clock go on."""
        self._rules.retune(rules)

    def feed(self, audio: np.ndarray) -> list[TurnEdge]:
        probabilities = self._stream.feed(audio)
        self._trail.extend(float(p) for p in probabilities)
        self._windows += probabilities.shape[0]
        edges = (self._rules.push(float(p)) for p in probabilities)
        return [TurnEdge(e.edge, e.at + self._origin) for e in edges if e is not None]

    def speech_since(self, at: int) -> int | None:
        """The start of the first window from sample ``at`` on that is speech, if any."""
        at -= self._origin
        first = max(-(-at // WINDOW), self._windows - len(self._trail))
        offset = self._windows - len(self._trail)
        for index in range(first, self._windows):
            if self._trail[index - offset] >= self._rules.rules.threshold:
                return index * WINDOW + self._origin
        return None

    def pause(self, start: int, end: int) -> int:
        """Where to cut between samples ``start`` and ``end``: the best pause of the windows
        heard there (``end`` itself if none were)."""
        first = max(-(-(start - self._origin) // WINDOW), self._windows - len(self._trail))
        last = min((end - self._origin) // WINDOW, self._windows)  # wholly before ``end``
        if last <= first:
            return end
        trail = np.fromiter(self._trail, dtype=np.float32)
        offset = self._windows - len(self._trail)
        return best_pause(trail[first - offset : last - offset], first) + self._origin
