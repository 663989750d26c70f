"""``asrserve bench memory``: a server's resident memory while it runs hours of audio.

Each case is sent to one fresh server as jobs; the server's RSS is sampled every 0.1 s
from the moment the first upload starts until its jobs end (``run_s`` caps a case whose
audio is speech: its jobs are cancelled then, after decode, VAD and that long of inference,
which is the steady state). The figure is the peak above the RSS measured just before.
Speech runs forward passes of full batches, whose working memory in the engine (encoder
output tiled for each beam) is the same for any file: the 10-minute case shows it beside
the 4-hour one, so that what a file's length costs is the difference between them.
"""

from __future__ import annotations

import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import httpx
import numpy as np

from asrserve.audio.decode import stream
from asrserve.bench.corpus import Clip, build_corpus, write_wav
from asrserve.bench.soak import RssSampler, rss_bytes
from asrserve.cli.server_process import ServerProcess

MIB = 1024 * 1024
HOURS = 3.99  # just under the default 4 h limit


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    copies: int = 1
    run_s: float | None = None  # cancel after this long (speech); None: until done
    fields: tuple[tuple[str, str], ...] = ()  # the job's form fields besides its file


def _flac(path: Path, blocks: Any, rate: int = 16_000) -> Path:
    with av.open(str(path), "w", format="flac") as out:
        stream = out.add_stream("flac", rate=rate, layout="mono")
        for block in blocks:
            frame = av.AudioFrame.from_ndarray(block.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def _silence(seconds: float) -> Any:
    block = np.zeros(16_000 * 60, dtype=np.int16)
    for _ in range(int(seconds // 60)):
        yield block


def _speech(clips: list[Clip], seconds: float) -> Any:
    """The corpus's clips in turn, 1 s of silence between them, for ``seconds``."""
    pieces: list[np.ndarray] = []
    for clip in clips:
        pieces.extend(stream(clip.path, 3600))
        pieces.append(np.zeros(16_000, dtype=np.int16))
    loop = np.concatenate(pieces)
    for _ in range(int(seconds * 16_000 // loop.size)):
        yield loop


def build_cases(folder: Path) -> list[Case]:
    folder.mkdir(parents=True, exist_ok=True)
    seconds = HOURS * 3600
    slow = folder / "one_hertz.wav"
    write_wav(slow, np.zeros(int(seconds), dtype=np.int16), rate=1)
    silence = _flac(folder / "silence.flac", _silence(seconds))
    clips = build_corpus(Path(".corpus") / "bench", n_clips=24, long_clip_seconds=0.0)
    speech = _flac(folder / "speech.flac", _speech(clips, seconds))
    short = _flac(folder / "speech_10min.flac", _speech(clips, 600))
    eight = _flac(folder / "speech_8min.flac", _speech(clips, 480))
    logprobs = (("include[]", "logprobs"),)
    return [
        Case("8 min of speech, FLAC, whole", eight),
        Case("8 min of speech, FLAC, whole, include[]=logprobs", eight, fields=logprobs),
        Case(f"{HOURS} h at 1 Hz, WAV ({slow.stat().st_size // 1024} KiB)", slow),
        Case(f"{HOURS} h of silence, FLAC ({silence.stat().st_size // 1024} KiB)", silence),
        Case(f"4 x {HOURS} h of silence at once", silence, copies=4),
        Case("10 min of speech, FLAC, whole (the same batches)", short),
        Case(f"{HOURS} h of speech, FLAC, decode + 120 s of inference", speech, run_s=120.0),
    ]


def _submit(url: str, case: Case) -> str:
    with case.path.open("rb") as handle:
        response = httpx.post(
            f"{url}/v1/jobs", files={"file": handle}, data=dict(case.fields), timeout=600
        )
    response.raise_for_status()
    job_id: str = response.json()["id"]
    return job_id


def _wait(url: str, job_id: str, until: float | None) -> str:
    while until is None or time.monotonic() < until:
        wait = 30.0 if until is None else max(min(30.0, until - time.monotonic()), 0.1)
        job = httpx.get(f"{url}/v1/jobs/{job_id}", params={"wait": wait}, timeout=60).json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return str(job["status"])
    httpx.delete(f"{url}/v1/jobs/{job_id}", timeout=60)
    return "cancelled by the bench"


def measure(case: Case, data_dir: Path) -> dict[str, Any]:
    env = {  # room for four 4 h files in the async backlog (8 h by default)
        "ASRSERVE_RECORD_TRAFFIC": "false",
        "ASRSERVE_MAX_QUEUED_AUDIO_S": str(24 * 3600),
    }
    server = ServerProcess(data_dir, env=env).start(120)
    try:
        assert server.proc is not None
        idle = rss_bytes(server.proc.pid)
        start = time.monotonic()
        sampler = RssSampler(server.proc.pid, 0.1, start)
        with sampler, ThreadPoolExecutor(case.copies) as pool:
            ids = list(pool.map(lambda _: _submit(server.url, case), range(case.copies)))
            until = None if case.run_s is None else time.monotonic() + case.run_s
            outcomes = list(pool.map(lambda job: _wait(server.url, job, until), ids))
        return {
            "case": case.name,
            "jobs": outcomes,
            "idle_mib": round(idle / MIB, 1),
            "peak_above_idle_mib": round((sampler.peak - idle) / MIB, 1),
            "after_mib": round(rss_bytes(server.proc.pid) / MIB, 1),
            "wall_s": round(time.monotonic() - start, 1),
        }
    finally:
        server.stop()


def run_memory(json_path: Path | None) -> int:
    rows = []
    with tempfile.TemporaryDirectory(prefix="asrserve-memory-") as folder:
        for index, case in enumerate(build_cases(Path(folder) / "audio")):
            row = measure(case, Path(folder) / f"server{index}" / "data")
            rows.append(row)
            print(
                f"{row['case']:<58} peak {row['peak_above_idle_mib']:7.1f} MiB above idle "
                f"({row['idle_mib']} MiB), after {row['after_mib']} MiB, {row['wall_s']} s, "
                f"jobs {', '.join(row['jobs'])}",
                flush=True,
            )
    if json_path is not None:
        json_path.write_text(json.dumps({"memory": rows}, indent=2) + "\n")
    return 0
