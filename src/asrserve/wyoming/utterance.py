"""One utterance's audio: ``audio-start``'s format, each ``audio-chunk`` converted to 16 kHz
16-bit mono by the library's converter as it arrives, held up to a limit, and stored as a
WAV file for the service to take as an upload."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from wyoming.audio import AudioChunk, AudioChunkConverter, AudioStart

from asrserve.audio.raw import SAMPLE_BYTES, wrap_raw_pcm
from asrserve.engine.base import SAMPLING_RATE
from asrserve.wyoming.framing import BadEvent

WIDTHS = (1, 2, 3, 4)  # bytes per sample audioop converts
CHANNELS = (1, 2)  # mono, or stereo mixed down
RATES = range(1000, 192_001)


class TooLong(Exception):
    """The utterance is over the limit."""


@dataclass
class Utterance:
    """The audio of one ``audio-start`` ... ``audio-stop``."""

    start: AudioStart
    max_bytes: int  # of 16 kHz 16-bit mono audio

    def __post_init__(self) -> None:
        fmt = self.start
        if not all(type(value) is int for value in (fmt.rate, fmt.width, fmt.channels)) or (
            fmt.rate not in RATES or fmt.width not in WIDTHS or fmt.channels not in CHANNELS
        ):
            raise BadEvent(
                f"audio format rate={fmt.rate} width={fmt.width} channels={fmt.channels} is not"
                f" served: rate 1000-192000 Hz, width 1-4 bytes, 1 or 2 channels",
                code="unsupported_audio_format",
            )
        self.pcm = bytearray()
        self._converter = AudioChunkConverter(rate=SAMPLING_RATE, width=SAMPLE_BYTES, channels=1)

    @classmethod
    def begun(cls, event_start: AudioStart, max_seconds: float) -> Utterance:
        return cls(event_start, int(max_seconds * SAMPLING_RATE) * SAMPLE_BYTES)

    @property
    def seconds(self) -> float:
        return len(self.pcm) / (SAMPLING_RATE * SAMPLE_BYTES)

    def add(self, chunk: AudioChunk) -> None:
        """The chunk's audio, converted; :class:`BadEvent` for a chunk in another format
        than ``audio-start``'s or not whole samples, :class:`TooLong` past the limit."""
        fmt = self.start
        if (chunk.rate, chunk.width, chunk.channels) != (fmt.rate, fmt.width, fmt.channels):
            raise BadEvent(
                "an audio-chunk's format differs from its audio-start's",
                code="audio_format_changed",
            )
        if len(chunk.audio) % (fmt.width * fmt.channels):
            raise BadEvent("an audio-chunk holds a partial sample", code="bad_audio")
        converted = self._converter.convert(chunk).audio
        if len(self.pcm) + len(converted) > self.max_bytes:
            raise TooLong()
        self.pcm += converted

    async def store(self, path: Path) -> StoredAudio:
        """The audio as a WAV file at ``path``, off the event loop."""
        size = await asyncio.to_thread(_write, path, bytes(self.pcm))
        return StoredAudio(path, size)


def _write(path: Path, pcm: bytes) -> int:
    path.write_bytes(pcm)
    return wrap_raw_pcm(path)


@dataclass(frozen=True)
class StoredAudio:
    """An utterance's WAV file, as the service takes an upload (``ReceivedFile``)."""

    path: Path
    size: int
    filename: str = "wyoming.wav"

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
