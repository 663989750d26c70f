"""``asrserve bench wyoming``: Wyoming speech-to-text servers side by side, as satellites
use them (docs/benchmarks.md, "Wyoming: asrserve and wyoming-faster-whisper side by side").

Each satellite is a client that, like Home Assistant's Wyoming speech-to-text, opens a
connection per utterance and sends ``transcribe``, ``audio-start``, the audio as 16 kHz
16-bit mono chunks of 1024 samples as fast as the socket takes them, and ``audio-stop``;
an utterance's latency runs from ``audio-stop`` written to ``transcript`` read. The
utterances are short voice commands synthesized with espeak-ng. The servers' rounds
alternate (A B A B …) so that the machine's noise falls on both.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from asrserve.audio.decode import decode
from asrserve.bench.corpus import synthesize
from asrserve.bench.wer import wer
from asrserve.wyoming.framing import read_event

# What people say to a voice assistant: 1–4 s each as espeak-ng speaks them.
COMMANDS: tuple[str, ...] = (
    "Turn on the kitchen lights.",
    "What's the weather tomorrow?",
    "Set a timer for ten minutes.",
    "Turn off the bedroom fan.",
    "Lock the front door.",
    "What time is it?",
    "Open the garage door.",
    "Play some music in the living room.",
    "Set the thermostat to twenty degrees.",
    "Close the blinds in the office.",
    "Is the back door locked?",
    "Add milk to the shopping list.",
)
RATE, WIDTH, CHANNELS, CHUNK_SAMPLES = 16000, 2, 1, 1024
FORMAT = {"rate": RATE, "width": WIDTH, "channels": CHANNELS}
LANGUAGE = "en"  # what Home Assistant's pipeline names in ``transcribe``
READ_TIMEOUT_S = 300.0  # a bound on a server that never answers, not a measurement


@dataclass(frozen=True)
class Spoken:
    """An utterance: what is said, and its audio as 16 kHz 16-bit mono PCM."""

    text: str
    pcm: bytes

    @property
    def seconds(self) -> float:
        return len(self.pcm) / (RATE * WIDTH * CHANNELS)


@dataclass(frozen=True)
class Heard:
    """One utterance's answer: its text (None: the server answered ``error``)."""

    reference: str
    text: str | None
    latency_s: float


@dataclass(frozen=True)
class Round:
    """One round of one server at one concurrency: every answer, and its wall time."""

    heard: list[Heard]
    wall_s: float


def pcm16(path: Path, max_seconds: float = 60.0) -> bytes:
    """A file's audio (at most ``max_seconds`` of it) as 16 kHz 16-bit mono, decoded by
    the project's decode."""
    samples = decode(path, max_seconds=max_seconds)
    return bytes((np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes())


def spoken_commands(folder: Path, texts: Sequence[str] = COMMANDS) -> list[Spoken]:
    """Each of ``texts`` spoken by espeak-ng (WAVs written to ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    spoken = []
    for index, text in enumerate(texts):
        path = folder / f"command-{index:02d}.wav"
        synthesize(text, path)
        spoken.append(Spoken(text, pcm16(path)))
    return spoken


def event_bytes(kind: str, data: dict[str, Any] | None = None, payload: bytes = b"") -> bytes:
    """One Wyoming event as it goes on the wire: a JSON header line, then the payload."""
    header: dict[str, Any] = {"type": kind, "data": data or {}}
    if payload:
        header["payload_length"] = len(payload)
    return json.dumps(header).encode() + b"\n" + payload


def utterance_events(spoken: Spoken, language: str = LANGUAGE) -> list[bytes]:
    """``transcribe``, ``audio-start``, the chunks, ``audio-stop`` (its last item)."""
    step = CHUNK_SAMPLES * WIDTH * CHANNELS
    chunks = [
        event_bytes("audio-chunk", FORMAT, spoken.pcm[i : i + step])
        for i in range(0, len(spoken.pcm), step)
    ]
    start = [event_bytes("transcribe", {"language": language}), event_bytes("audio-start", FORMAT)]
    return [*start, *chunks, event_bytes("audio-stop")]


async def ask(host: str, port: int, spoken: Spoken) -> Heard:
    """One utterance on a connection of its own, as Home Assistant sends one."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        for event in utterance_events(spoken):
            writer.write(event)
            await writer.drain()
        stopped = time.perf_counter()
        while True:
            answer = await asyncio.wait_for(read_event(reader), READ_TIMEOUT_S)
            if answer is None or answer.type == "error":
                return Heard(spoken.text, None, time.perf_counter() - stopped)
            if answer.type == "transcript":
                text = str(answer.data.get("text", ""))
                return Heard(spoken.text, text, time.perf_counter() - stopped)
    finally:
        writer.close()
        await writer.wait_closed()


async def satellite(host: str, port: int, queue: Sequence[Spoken]) -> list[Heard]:
    """A satellite's utterances, one after the other."""
    return [await ask(host, port, spoken) for spoken in queue]


def queues(spoken: Sequence[Spoken], satellites: int, utterances: int) -> list[list[Spoken]]:
    """``utterances`` split evenly between the satellites (at least one each), each
    satellite starting at another command so that they do not speak in unison."""
    each = max(1, utterances // satellites)
    return [[spoken[(s * each + k) % len(spoken)] for k in range(each)] for s in range(satellites)]


async def one_round(
    host: str, port: int, spoken: Sequence[Spoken], satellites: int, utterances: int
) -> Round:
    """The satellites speaking at once; every answer, and the round's wall time."""
    started = time.perf_counter()
    answers = await asyncio.gather(
        *(satellite(host, port, q) for q in queues(spoken, satellites, utterances))
    )
    return Round([heard for one in answers for heard in one], time.perf_counter() - started)


def latency_stats(latencies: Sequence[float]) -> dict[str, float | None]:
    """p50, p95 and the largest of ``latencies`` (s), None each where there are none."""
    if not latencies:
        return {"p50_s": None, "p95_s": None, "max_s": None}
    values = np.asarray(latencies)
    return {
        "p50_s": round(float(np.percentile(values, 50)), 3),
        "p95_s": round(float(np.percentile(values, 95)), 3),
        "max_s": round(float(values.max()), 3),
    }


def summary(server: str, satellites: int, rounds: Sequence[Round]) -> dict[str, Any]:
    """A server's rounds at one concurrency together: latency over every answer,
    utterances per second over the rounds' wall time, WER over the texts answered."""
    heard = [h for r in rounds for h in r.heard]
    answered = [h for h in heard if h.text is not None]
    wall = sum(r.wall_s for r in rounds)
    scored = wer([h.reference for h in answered], [h.text or "" for h in answered])
    return {
        "server": server,
        "satellites": satellites,
        "utterances": len(heard),
        "errors": len(heard) - len(answered),
        **latency_stats([h.latency_s for h in answered]),
        "utterances_per_s": round(len(answered) / wall, 3) if wall else None,
        "wer": round(scored, 4) if answered else None,
        "p50_s_by_text": {
            text: latency_stats([h.latency_s for h in answered if h.reference == text])["p50_s"]
            for text in dict.fromkeys(h.reference for h in answered)
        },
        "rounds": [
            {
                "wall_s": round(r.wall_s, 3),
                "utterances_per_s": round(_answered(r) / r.wall_s, 3) if r.wall_s else None,
                "p50_s": latency_stats([h.latency_s for h in r.heard if h.text is not None])[
                    "p50_s"
                ],
            }
            for r in rounds
        ],
    }


def _answered(one: Round) -> int:
    return sum(1 for h in one.heard if h.text is not None)


def wyoming_report(body: dict[str, Any]) -> str:
    """The rows of ``body["rows"]`` as a table."""
    lines = [
        "| server | satellites | utterances | errors | p50 s | p95 s | max s | utt/s | WER |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in body["rows"]:
        cells = [row[k] for k in ("server", "satellites", "utterances", "errors")]
        cells += [_cell(row[k]) for k in ("p50_s", "p95_s", "max_s", "utterances_per_s")]
        cells.append("–" if row["wer"] is None else f"{row['wer']:.4f}")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


@dataclass(frozen=True)
class Target:
    """A Wyoming server under test, at ``host``:``port``."""

    name: str
    host: str
    port: int


def measure_wyoming(
    targets: Sequence[Target],
    spoken: Sequence[Spoken],
    concurrencies: Sequence[int],
    utterances: int,
    rounds: int,
) -> list[dict[str, Any]]:
    """Per concurrency, ``rounds`` rounds of each server in turn (A B A B …) after a
    warm-up utterance each; a row per server and concurrency."""
    for target in targets:
        asyncio.run(satellite(target.host, target.port, spoken[:2]))
    done: dict[tuple[str, int], list[Round]] = {}
    for satellites in concurrencies:
        for index in range(rounds):
            for target in targets:
                run = one_round(target.host, target.port, spoken, satellites, utterances)
                done.setdefault((target.name, satellites), []).append(asyncio.run(run))
                print(f"  {target.name}, {satellites} satellite(s), round {index + 1}: done")
    return [summary(name, satellites, got) for (name, satellites), got in done.items()]
