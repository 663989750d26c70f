"""``asrserve bench live N,M``: how many live sessions one machine holds.

For each policy, a fresh server; for each N, N WebSocket sessions at once, each replaying
the bench files one after another (1 s of silence between them, each session from another
file) at real-time pace in 100 ms frames of 24 kHz PCM16, as OpenAI's clients send, for
``--live-seconds``; a frame is sent once it has been spoken. Per N: the delay of each
completed turn (from the end of its speech, where the server's VAD puts it, ``audio_end_ms``,
to its ``completed`` event), of each interim delta (from the end of the audio it was decoded
from), the mean batch size and the devices' busy fraction over the run (``/v1/scheduler``),
errors, and the completed turns' WER against the files' references. Per word
(``bench/live_words.py``): the lag from its end in the audio (its word timestamp in a
whole-file decode of its clip) to the first delta that held it; and the deltas, joined, against
the completed turns (WER; 0 when no delta was taken back), with the share of the completed
words shown before their turn was committed. The answer per policy: the largest N whose
completed-turn p95 is at most ``TARGET_P95_S``, without errors.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av
import httpx
import numpy as np
from websockets.asyncio.client import connect

from asrserve.audio.decode import decode
from asrserve.bench.live_words import SpokenWord, spoken_words, word_lags
from asrserve.bench.load import AudioFile
from asrserve.bench.runner import policy_env
from asrserve.bench.wer import wer
from asrserve.cli.server_process import ServerProcess

RATE = 24000
FRAME_S = 0.1
GAP_S = 1.0
TARGET_P95_S = 1.5
QUIET_S = 3.0  # after its audio, how long a session waits for its last turn to start
LATE_S = 60.0  # then, how long it waits for its open turns' final text


@dataclass
class SessionLog:
    turns: list[float] = field(default_factory=list)  # completed-turn delays, s
    deltas: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    spoken: list[SpokenWord] = field(default_factory=list)  # the words fed, with their ends
    shown: dict[str, list[tuple[float, str]]] = field(default_factory=dict)  # deltas per turn
    early: int = 0  # delta words that arrived before their turn was committed
    unfinished: int = 0  # turns started whose final text had not come LATE_S after the rest


@dataclass
class Program:
    audio: bytes  # 24 kHz PCM16
    said: list[str]  # the references of the files it holds
    spoken: list[SpokenWord]  # their words, where they end in ``audio``


def program(
    files: list[AudioFile], first: int, seconds: float, words: dict[Path, list[dict[str, Any]]]
) -> Program:
    """A session's audio: files from ``first`` on, joined with gaps, at least ``seconds``
    long; ``words``: each file's words as a whole-file decode timed them."""
    pieces, said, spoken, length, index = [], [], [], 0.0, first
    gap = np.zeros(int(GAP_S * 16000), dtype=np.float32)
    while length < seconds:
        file = files[index % len(files)]
        samples = decode(file.path, 1e9)
        pieces += [samples, gap]
        said.append(file.reference or "")
        spoken += spoken_words(words.get(file.path, []), length)
        length += samples.shape[0] / 16000 + GAP_S
        index += 1
    return Program(pcm16(np.concatenate(pieces), RATE), said, spoken)


def file_words(url: str, files: list[AudioFile]) -> dict[Path, list[dict[str, Any]]]:
    """Each file's words with their times, from one whole-file decode by the server."""
    form = {"response_format": "verbose_json", "timestamp_granularities[]": "word"}
    found = {}
    for file in files:
        answer = httpx.post(
            f"{url}/v1/audio/transcriptions",
            files={"file": (file.path.name, file.data)},
            data=form,
            timeout=300,
        )
        answer.raise_for_status()
        found[file.path] = answer.json()["words"]
    return found


def pcm16(samples: np.ndarray, rate: int) -> bytes:
    """16 kHz float samples as little-endian PCM16 at ``rate``, what a live client sends."""
    if rate != 16000:
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        frame = av.AudioFrame.from_ndarray(samples[None, :], format="flt", layout="mono")
        frame.sample_rate = 16000
        frames = [*resampler.resample(frame), *resampler.resample(None)]
        samples = np.concatenate([f.to_ndarray().reshape(-1) for f in frames])
    pcm: bytes = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    return pcm


class _Events:
    """A session's events as they come: the delays of turns and interim text, and which
    turns are still waiting for their final text."""

    def __init__(self, log: SessionLog, start: float) -> None:
        self.log, self.start = log, start
        self.ends: dict[str, float] = {}  # a stopped turn's end of speech, s into the session
        self.opened: set[str] = set()  # turns started whose final text has not come
        self.committed: set[str] = set()  # turns gone to their final decode
        self.settled = asyncio.Event()  # set while no turn is open
        self.settled.set()

    def on(self, event: dict[str, Any]) -> None:
        now, kind, log = time.monotonic() - self.start, event["type"], self.log
        if kind == "input_audio_buffer.speech_started":
            self.opened.add(event["item_id"])
        elif kind == "input_audio_buffer.speech_stopped":
            self.ends[event["item_id"]] = event["audio_end_ms"] / 1000
        elif kind.endswith("input_audio_transcription.completed"):
            log.heard.append(event["transcript"])
            log.turns.append(now - self.ends[event["item_id"]])
        elif kind.endswith("input_audio_transcription.delta"):
            log.deltas.append(now - event["audio_end_ms"] / 1000)
            log.shown.setdefault(event["item_id"], []).append((now, event["delta"]))
            if event["item_id"] not in self.committed:
                log.early += len(event["delta"].split())
        elif kind == "input_audio_buffer.committed":
            self.committed.add(event["item_id"])
        if kind in ("error", "conversation.item.input_audio_transcription.failed"):
            log.errors.append(json.dumps(event)[:200])
        if kind.endswith(("transcription.completed", "transcription.failed")):
            self.opened.discard(event["item_id"])
        if self.opened:
            self.settled.clear()
        else:
            self.settled.set()


async def run_session(url: str, plan: Program, delay: float) -> SessionLog:
    log, audio = SessionLog(said=plan.said, spoken=plan.spoken), plan.audio
    await asyncio.sleep(delay)  # staggered starts, as real sessions are
    ws_url = url.replace("http://", "ws://", 1) + "/v1/realtime?intent=transcription"
    async with connect(ws_url, max_size=None) as ws:
        await ws.recv()
        events = _Events(log, time.monotonic())

        async def read() -> None:
            async for message in ws:
                events.on(json.loads(message))

        reader = asyncio.create_task(read())
        step = int(RATE * FRAME_S) * 2
        for at in range(0, len(audio), step):
            spoken = (at + step) / 2 / RATE  # a frame is sent once it has been spoken
            await asyncio.sleep(max(0.0, events.start + spoken - time.monotonic()))
            chunk = base64.b64encode(audio[at : at + step]).decode()
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
        await asyncio.sleep(QUIET_S)  # the server's VAD ends the last turn in this time
        with contextlib.suppress(TimeoutError):  # a turn later than that is counted too
            await asyncio.wait_for(events.settled.wait(), LATE_S)
        log.unfinished = len(events.opened)
        await ws.close()
        await asyncio.gather(reader, return_exceptions=True)
    return log


async def _sessions(url: str, programs: list[Program]) -> list[SessionLog]:
    spread = [i * 2.0 / max(len(programs), 1) for i in range(len(programs))]
    runs = [run_session(url, p, d) for p, d in zip(programs, spread, strict=True)]
    return list(await asyncio.gather(*runs))


def _percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def _shown(log: SessionLog) -> list[tuple[float, str]]:
    """The session's deltas, turn after turn (a turn's last delta may come after the next
    turn's first), each with its arrival."""
    return [delta for deltas in log.shown.values() for delta in deltas]


def measure_n(
    url: str,
    files: list[AudioFile],
    n: int,
    seconds: float,
    words: dict[Path, list[dict[str, Any]]],
) -> dict[str, Any]:
    programs = [program(files, i * 3, seconds, words) for i in range(n)]
    before = httpx.get(f"{url}/v1/scheduler", timeout=30).json()
    started = time.monotonic()
    logs = asyncio.run(_sessions(url, programs))
    wall = time.monotonic() - started
    after = httpx.get(f"{url}/v1/scheduler", timeout=30).json()
    batches = after["batches"] - before["batches"]
    items = after["items"] - before["items"]
    busy = sum(after["device_busy_seconds"].values()) - sum(before["device_busy_seconds"].values())
    turns = [d for log in logs for d in log.turns]
    deltas = [d for log in logs for d in log.deltas]
    heard = [" ".join(log.heard) for log in logs]
    said = [" ".join(log.said) for log in logs]
    shown = ["".join(text for _, text in _shown(log)) for log in logs]
    lags = [lag for log in logs for lag in word_lags(_shown(log), log.spoken)]
    completed_words = sum(len(text.split()) for text in heard)
    return {
        "sessions": n,
        "turns": len(turns),
        "errors": sum(len(log.errors) for log in logs),
        "unfinished": sum(log.unfinished for log in logs),
        "error_samples": [e for log in logs for e in log.errors][:5],
        "turn_p50_s": _percentile(turns, 50),
        "turn_p95_s": _percentile(turns, 95),
        "delta_p50_s": _percentile(deltas, 50),
        "delta_p95_s": _percentile(deltas, 95),
        "deltas": len(deltas),
        "mean_batch": round(items / batches, 3) if batches else None,
        "busy_fraction": round(busy / (wall * len(after["device_busy_seconds"])), 3),
        "wer": round(wer(said, heard), 4),
        "word_lag_p50_s": _percentile(lags, 50),
        "word_lag_p95_s": _percentile(lags, 95),
        "words_timed": len(lags),
        "delta_wer": round(wer(heard, shown), 4),
        "shown_early": round(sum(log.early for log in logs) / completed_words, 3)
        if completed_words
        else None,
    }


def measure_live(
    files: list[AudioFile],
    counts: list[int],
    policies: list[str],
    seconds: float,
    env: dict[str, str],
    folder: Path,
) -> dict[str, Any]:
    body: dict[str, Any] = {"seconds": seconds, "target_p95_s": TARGET_P95_S, "policies": {}}
    for policy in policies:
        most = str(max(counts))  # every session from this one client address
        server_env = {
            **env,
            **policy_env(policy),
            "ASRSERVE_LIVE_MAX_SESSIONS": most,
            "ASRSERVE_LIVE_MAX_SESSIONS_PER_KEY": most,
        }
        server = ServerProcess(folder / policy / "data", env=server_env).start(timeout=180)
        rows = []
        try:
            words = file_words(server.url, files)
            for n in counts:
                row = measure_n(server.url, files, n, seconds, words)
                print(f"{policy} {live_row(row)}", flush=True)
                rows.append(row)
        finally:
            server.stop()
        held = [r["sessions"] for r in rows if _within(r)]
        body["policies"][policy] = {"rows": rows, "largest_n": max(held) if held else 0}
    return body


def _within(row: dict[str, Any]) -> bool:
    p95 = row["turn_p95_s"]
    return p95 is not None and p95 <= TARGET_P95_S and not row["errors"] and not row["unfinished"]


def live_row(row: dict[str, Any]) -> str:
    return (
        f"N={row['sessions']}: {row['turns']} turns ({row['unfinished']} unfinished), "
        f"{row['errors']} errors, "
        f"turn p50/p95 {row['turn_p50_s']}/{row['turn_p95_s']} s, "
        f"delta p50/p95 {row['delta_p50_s']}/{row['delta_p95_s']} s ({row['deltas']}), "
        f"batch {row['mean_batch']}, busy {row['busy_fraction']}, WER {row['wer']}, "
        f"word lag p50/p95 {row['word_lag_p50_s']}/{row['word_lag_p95_s']} s "
        f"({row['words_timed']}), deltas vs completed WER {row['delta_wer']}, "
        f"shown before commit {row['shown_early']}"
    )


def live_report(body: dict[str, Any]) -> str:
    target = body["target_p95_s"]
    lines = [
        f"live sessions, {body['seconds']:g} s each; target: completed-turn p95 ≤ {target:g} s"
    ]
    for policy, result in body["policies"].items():
        lines += [f"{policy}: " + live_row(row) for row in result["rows"]]
        lines.append(f"{policy}: largest N within the target: {result['largest_n']}")
    return "\n".join(lines)
