"""The result of transcribing one audio file, independent of engine and wire format."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Word(BaseModel):
    model_config = ConfigDict(frozen=True)

    word: str
    start: float
    end: float
    probability: float = 0.0


class TokenLogprob(BaseModel):
    """One text token of a decode and its log probability under the model (OpenAI's
    ``Logprob``): ``token`` is the text it adds (a character split across tokens comes
    with the token that completes it), ``bytes`` its own UTF-8 bytes."""

    model_config = ConfigDict(frozen=True)

    token: str
    logprob: float
    bytes: list[int]


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
    logprobs: list[TokenLogprob] | None = None  # its text tokens', when they were asked for
    speaker: str | None = None  # who said it, when diarization was asked for


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
    def logprobs(self) -> list[TokenLogprob]:
        """Every text token's log probability, in order (empty unless they were asked for)."""
        return [token for segment in self.segments for token in segment.logprobs or ()]

    @property
    def words(self) -> list[Word]:
        return [word for segment in self.segments for word in segment.words or ()]
