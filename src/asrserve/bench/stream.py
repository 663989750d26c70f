"""``asrserve bench stream SECONDS``: how soon a streamed answer shows text.

The bench files are joined (1 s of silence between them, repeated as needed) into one file of
about SECONDS. A fresh server answers it ``--requests`` times each way, alternating: streamed
(``stream=true``: the time to the first ``transcript.text.delta`` and to
``transcript.text.done``, the number of deltas, and whether they join to the text) and plain
(the time to the JSON answer). The report gives the medians and the two ratios that matter:
first delta ÷ full answer (streamed), and streamed ÷ plain (what streaming costs). A second
fresh server that decodes each file whole before its first window (``staged_decode`` off: how
it was before) answers the same rounds side by side, under ``baseline``.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from asrserve.audio.decode import decode
from asrserve.bench.corpus import write_float_wav
from asrserve.bench.load import AudioFile
from asrserve.cli.server_process import ServerProcess
from asrserve.engine.base import SAMPLING_RATE

GAP_S = 1.0
TIMEOUT = httpx.Timeout(1800.0, connect=10.0)


@dataclass(frozen=True)
class StreamRun:
    first_delta_s: float
    done_s: float
    deltas: int
    joined_equals_text: bool
    plain_s: float
    same_text: bool


def long_file(files: list[AudioFile], seconds: float, folder: Path) -> tuple[Path, float]:
    """The files' audio joined into one WAV of at least ``seconds``; its path and length."""
    gap = np.zeros(int(GAP_S * SAMPLING_RATE), dtype=np.float32)
    pieces: list[np.ndarray] = []
    length = 0
    while length < seconds * SAMPLING_RATE:
        for file in files:
            samples = decode(file.path, 1e9)
            pieces += [samples, gap]
            length += samples.shape[0] + gap.shape[0]
            if length >= seconds * SAMPLING_RATE:
                break
    audio = np.concatenate(pieces)
    path = write_float_wav(folder / f"long-{round(seconds)}s.wav", audio, SAMPLING_RATE)
    return path, audio.shape[0] / SAMPLING_RATE


def streamed(client: httpx.Client, path: Path) -> tuple[float, float, int, bool, str]:
    """(first delta s, done s, deltas, deltas joined == text, text) of one streamed answer."""
    start = time.perf_counter()
    first, deltas, text = None, [], None
    with (
        path.open("rb") as audio,
        client.stream(
            "POST",
            "/v1/audio/transcriptions",
            files={"file": (path.name, audio)},
            data={"model": "whisper-1", "stream": "true"},
        ) as response,
    ):
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line.removeprefix("data: "))
            if event.get("type") == "transcript.text.delta":
                first = first if first is not None else time.perf_counter() - start
                deltas.append(event["delta"])
            elif event.get("type") == "transcript.text.done":
                text = event["text"]
            else:
                raise RuntimeError(f"the stream ended with {event}")
    done = time.perf_counter() - start
    if text is None:
        raise RuntimeError("the stream ended without transcript.text.done")
    return first if first is not None else done, done, len(deltas), "".join(deltas) == text, text


def plain(client: httpx.Client, path: Path) -> tuple[float, str]:
    start = time.perf_counter()
    with path.open("rb") as audio:
        response = client.post(
            "/v1/audio/transcriptions",
            files={"file": (path.name, audio)},
            data={"model": "whisper-1"},
        )
    response.raise_for_status()
    return time.perf_counter() - start, str(response.json()["text"])


def measure_stream(
    files: list[AudioFile], seconds: float, rounds: int, env: dict[str, str]
) -> dict[str, Any]:
    """The file answered by a server as configured and, side by side (each round asks
    both, one after the other), by one that decodes the whole file before its first window
    (``ASRSERVE_STAGED_DECODE=false``, the baseline): the two see the same machine."""
    with tempfile.TemporaryDirectory(prefix="asrserve-bench-stream-") as tmp:
        path, duration = long_file(files, seconds, Path(tmp))
        baseline_env = {**env, "ASRSERVE_STAGED_DECODE": "false"}
        servers = [
            ServerProcess(Path(tmp) / name, env=server_env).start(timeout=180)
            for name, server_env in (("data", env), ("baseline", baseline_env))
        ]
        runs: list[list[StreamRun]] = [[], []]
        clients = [httpx.Client(base_url=s.url, timeout=TIMEOUT) for s in servers]
        try:
            for client in clients:
                plain(client, path)  # warm-up: the first request pays for loading and caches
            for _ in range(rounds):
                for client, answers in zip(clients, runs, strict=True):
                    answers.append(_round(client, path))
        finally:
            for client in clients:
                client.close()
            for server in servers:
                server.stop()
    return {**stream_body(runs[0], duration), "baseline": stream_body(runs[1], duration)}


def _round(client: httpx.Client, path: Path) -> StreamRun:
    first, done, count, joined, text = streamed(client, path)
    plain_s, plain_text = plain(client, path)
    return StreamRun(first, done, count, joined, plain_s, plain_text == text)


def stream_body(runs: list[StreamRun], duration: float) -> dict[str, Any]:
    first = statistics.median(run.first_delta_s for run in runs)
    done = statistics.median(run.done_s for run in runs)
    plain_s = statistics.median(run.plain_s for run in runs)
    return {
        "audio_s": round(duration, 1),
        "rounds": len(runs),
        "first_delta_s": round(first, 3),
        "first_delta_range_s": [
            round(min(run.first_delta_s for run in runs), 3),
            round(max(run.first_delta_s for run in runs), 3),
        ],
        "done_s": round(done, 3),
        "plain_s": round(plain_s, 3),
        "plain_range_s": [
            round(min(run.plain_s for run in runs), 3),
            round(max(run.plain_s for run in runs), 3),
        ],
        "first_delta_share": round(first / done, 3),
        "streamed_vs_plain": round(done / plain_s, 3),
        "runs": [asdict(run) for run in runs],
    }


def stream_report(body: dict[str, Any]) -> str:
    lines = [f"one file of {body['audio_s']} s, {body['rounds']} round(s) each way (medians):"]
    for name, side in (("staged", body), ("whole file first", body.get("baseline"))):
        if side is None:
            continue
        low, high = side["first_delta_range_s"]
        lines += [
            f"  {name}: first delta {side['first_delta_s']:.2f} s ({low:.2f}–{high:.2f});"
            f" done {side['done_s']:.2f} s (first delta at {side['first_delta_share']:.0%} of it)",
            f"    plain answer {side['plain_s']:.2f} s; streamed ÷ plain"
            f" {side['streamed_vs_plain']:.2f}",
        ]
    for index, run in enumerate(body["runs"]):
        lines.append(
            f"  round {index + 1}: {run['deltas']} deltas, joined = text: "
            f"{run['joined_equals_text']}, same text as plain: {run['same_text']}"
        )
    return "\n".join(lines)
