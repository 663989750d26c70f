"""Server-side turn detection (OpenAI's ``server_vad``): where a speaker's turn starts and
where it stops, from Silero VAD's speech probability of each 32 ms window.

A turn starts at the first window whose probability reaches ``threshold``; its audio begins
``prefix_padding_ms`` before that. It stops once ``silence_duration_ms`` of windows in a row
fall below it; its audio ends where that silence ends (Whisper closes its last segment better
with a little silence after the words). :class:`TurnRules` is the pure part, one probability
at a time; :class:`TurnDetector` feeds it from the audio.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from asrserve.audio.vad import WINDOW, SileroStream
from asrserve.engine.base import SAMPLING_RATE


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
    def __init__(self, rules: TurnDetection) -> None:
        self.rules = rules
        self.speaking = False
        self._windows = 0
        self._quiet = 0  # windows in a row below the threshold while speaking
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


class TurnDetector:
    """Audio in, turn edges out (the model runs in the caller's thread)."""

    def __init__(self, rules: TurnDetection) -> None:
        self._stream = SileroStream()
        self._rules = TurnRules(rules)

    @property
    def speaking(self) -> bool:
        return self._rules.speaking

    def feed(self, audio: np.ndarray) -> list[TurnEdge]:
        edges = (self._rules.push(float(p)) for p in self._stream.feed(audio))
        return [edge for edge in edges if edge is not None]
