"""The result of transcribing one audio file, independent of engine and wire format."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Word(BaseModel):
    model_config = ConfigDict(frozen=True)

    word: str
    start: float
    end: float
    probability: float = 0.0


class Segment(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    seek: int
    start: float
    end: float
    text: str
    tokens: list[int]
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    words: list[Word] | None = None


class Transcript(BaseModel):
    model_config = ConfigDict(frozen=True)

    language: str
    duration: float
    segments: list[Segment]
    task: str = "transcribe"
    language_probability: float | None = None  # when the language was detected

    @property
    def text(self) -> str:
        return "".join(segment.text for segment in self.segments).strip()

    @property
    def words(self) -> list[Word]:
        return [word for segment in self.segments for word in segment.words or ()]
