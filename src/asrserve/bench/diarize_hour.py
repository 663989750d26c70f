"""``asrserve bench diarize-hour [MINUTES]``: what a long diarized file costs a server, and
another key's synchronous answers while two of them run.

One server, auth on, two keys, warmed up by the meeting's first five minutes diarized as a
job (Whisper and the speaker models loaded, run in full batches: the memory a server that
has served holds). A MINUTES-long meeting of four gating voices
(``conversations.build_long``, 60 by default) is submitted by the first key as a job
answered plain (``json``), then with word timestamps (``verbose_json``, the transcription
a diarized answer needs: its words are what the speakers are joined to), then
``diarized_json``, one after the other: each one's time from submit to end, the server's
resident memory sampled every second (its peak over the warmed-up server's), and the
diarized job's DER against the meeting's truth. Then the second key asks for short
files one at a time (the bench corpus, ``--requests`` of them: its sync p50 and p95
alone), and again while the first key's two diarized jobs of the meeting run at once: the
p95 under them over the p95 alone. The server's log gives the diarization's passes
(speaker clips and segmentation chunks a second of device time, batch sizes) alone and
under the sync requests.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import av
import httpx
import numpy as np

from asrserve.bench.conversations import Conversation, build_long
from asrserve.bench.der import Labelled, score
from asrserve.bench.hostile import new_key
from asrserve.bench.load import AudioFile
from asrserve.bench.soak import RssSampler, rss_bytes
from asrserve.cli.server_process import ServerProcess

MIB = 1024 * 1024
TIMEOUT = httpx.Timeout(7200.0, connect=10.0)
SYNC_S = 12.0  # the other key's files: at most this long
WARM_MINUTES = 5.0


def write_flac(path: Path, samples: np.ndarray) -> Path:
    """16 kHz float samples as a FLAC file (a long meeting as a client would send it)."""
    pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype(np.int16)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("flac", rate=16000, layout="mono")
        for first in range(0, len(pcm), 16000 * 60):
            frame = av.AudioFrame.from_ndarray(pcm[None, first : first + 16000 * 60], "s16", "mono")
            frame.sample_rate = 16000
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


PLAIN = {"response_format": "json"}
WORDS = {"response_format": "verbose_json", "timestamp_granularities[]": "word"}
DIARIZED = {"response_format": "diarized_json"}


def _job(client: httpx.Client, path: Path, form: dict[str, str]) -> str:
    with path.open("rb") as audio:
        answer = client.post("/v1/jobs", files={"file": (path.name, audio)}, data=form)
    answer.raise_for_status()
    job_id: str = answer.json()["id"]
    return job_id


def _ended(client: httpx.Client, job_id: str) -> dict[str, Any]:
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", params={"wait": 60}).json()
        if job["status"] not in ("queued", "running"):
            return job


def _timed_job(
    client: httpx.Client, path: Path, form: dict[str, str]
) -> tuple[float, dict[str, Any]]:
    start = time.monotonic()
    job = _ended(client, _job(client, path, form))
    if job["status"] != "succeeded":
        raise RuntimeError(f"the {form} job {job['status']}: {job.get('error')}")
    return time.monotonic() - start, job


def _sync(client: httpx.Client, files: Sequence[AudioFile], stop: threading.Event) -> list[float]:
    """The other key's requests one after another, until ``stop`` (or all, if never set)."""
    times = []
    for file in files:
        if stop.is_set():
            break
        start = time.monotonic()
        answer = client.post(
            "/v1/audio/transcriptions",
            files={"file": (file.path.name, file.data)},
            data={"model": "whisper-1"},
        )
        answer.raise_for_status()
        times.append(time.monotonic() - start)
    return times


def _warm(client: httpx.Client, conversation: Conversation, folder: Path) -> None:
    """The meeting's first WARM_MINUTES diarized, as a job: Whisper and the speaker models
    loaded and run in full batches, as a server that has served is."""
    path = write_flac(folder / "warm.flac", conversation.samples[: int(WARM_MINUTES * 60 * 16000)])
    _timed_job(client, path, DIARIZED)


def _p95(times: Sequence[float]) -> float:
    return float(np.percentile(times, 95))


def _diarized_der(conversation: Conversation, job: dict[str, Any]) -> dict[str, float]:
    found = [Labelled(s["start"], s["end"], s["speaker"]) for s in job["result"]["segments"]]
    return {
        "der_collar_025_segments": round(score(conversation.turns, found, 0.25).der, 4),
        "speakers_found": len({s["speaker"] for s in job["result"]["segments"]}),
    }


def _passes(log: Path, start: int, end: int) -> dict[str, Any]:
    """The speaker passes the server logged between two sizes of its log: per task, items
    a second of device time and the mean batch."""
    with log.open("rb") as file:
        file.seek(start)
        text = file.read(end - start).decode(errors="replace")
    tasks: dict[str, list[tuple[int, float]]] = {}
    for line in text.splitlines():
        record = json.loads(line) if line.startswith("{") else {}
        if record.get("msg") == "batch" and record.get("task") in ("embed", "segment"):
            tasks.setdefault(record["task"], []).append((record["size"], record["compute_ms"]))
    return {
        task: {
            "items_per_device_s": round(
                sum(n for n, _ in rows) / sum(ms for _, ms in rows) * 1e3, 1
            ),
            "mean_batch": round(statistics.mean(n for n, _ in rows), 1),
            "passes": len(rows),
        }
        for task, rows in tasks.items()
    }


def _size(log: Path | None) -> int:
    return log.stat().st_size if log is not None and log.exists() else 0


def _passes_since(log: Path | None, before: int) -> dict[str, Any]:
    return {} if log is None else _passes(log, before, _size(log))


def measure_diarize_hour(
    minutes: float, files: Sequence[AudioFile], env: dict[str, str], requests: int
) -> dict[str, Any]:
    conversation = build_long(0, minutes * 60)
    short = [f for f in files if f.duration <= SYNC_S] or list(files)
    sync_files = [short[i % len(short)] for i in range(requests)]
    with tempfile.TemporaryDirectory(prefix="asrserve-bench-hour-") as tmp:
        path = write_flac(Path(tmp) / "meeting.flac", conversation.samples)
        data = Path(tmp) / "data"
        data.mkdir()
        keys = (new_key(data, "meeting"), new_key(data, "other"))
        # the meeting key may hold the whole async backlog: two meetings are more than its
        # default share (a quarter of 8 h)
        server_env = {**env, "ASRSERVE_AUTH": "on", "ASRSERVE_MAX_QUEUED_SHARE": "1.0"}
        server = ServerProcess(data, server_env).start(timeout=600)
        assert server.proc is not None
        pid = server.proc.pid
        meeting, other = (
            httpx.Client(base_url=server.url, timeout=TIMEOUT,
                         headers={"Authorization": f"Bearer {key}"})
            for key in keys
        )  # fmt: skip
        try:
            _sync(other, sync_files[:2], threading.Event())
            _warm(meeting, conversation, Path(tmp))
            idle = rss_bytes(pid)
            origin = time.monotonic()
            with RssSampler(pid, 1.0, origin) as plain_rss:
                plain_s, _ = _timed_job(meeting, path, PLAIN)
            with RssSampler(pid, 1.0, origin) as words_rss:
                words_s, _ = _timed_job(meeting, path, WORDS)
            log, before = server.log_path, _size(server.log_path)
            with RssSampler(pid, 1.0, origin) as diarized_rss:
                diarized_s, diarized = _timed_job(meeting, path, DIARIZED)
            alone_passes, before = _passes_since(log, before), _size(log)
            alone = _sync(other, sync_files, threading.Event())
            before = _size(log)
            stop = threading.Event()
            under: list[float] = []
            sync = threading.Thread(
                target=lambda: under.extend(_sync(other, sync_files * 50, stop))
            )
            with RssSampler(pid, 1.0, origin) as two_rss:
                jobs = [_job(meeting, path, DIARIZED) for _ in range(2)]
                sync.start()
                ended = [_ended(meeting, job_id) for job_id in jobs]
                stop.set()
                sync.join()
            loaded_passes = _passes_since(log, before)
        finally:
            meeting.close()
            other.close()
            server.stop()
    return {
        "minutes": round(len(conversation.samples) / 16000 / 60, 2),
        "plain_s": round(plain_s, 1),
        "words_s": round(words_s, 1),
        "diarized_s": round(diarized_s, 1),
        "diarized_over_plain": round(diarized_s / plain_s, 3),
        "idle_rss_mib": round(idle / MIB, 1),
        "plain_peak_growth_mib": round((plain_rss.peak - idle) / MIB, 1),
        "words_peak_growth_mib": round((words_rss.peak - idle) / MIB, 1),
        "diarized_peak_growth_mib": round((diarized_rss.peak - idle) / MIB, 1),
        "two_diarized_peak_growth_mib": round((two_rss.peak - idle) / MIB, 1),
        "diarized": _diarized_der(conversation, diarized),
        "passes_alone": alone_passes,
        "passes_under_sync": loaded_passes,
        "sync_alone": {
            "p50_s": round(statistics.median(alone), 3),
            "p95_s": round(_p95(alone), 3),
            "requests": len(alone),
        },
        "sync_under_two_diarized": {
            "p50_s": round(statistics.median(under), 3),
            "p95_s": round(_p95(under), 3),
            "requests": len(under),
        },
        "sync_p95_ratio": round(_p95(under) / _p95(alone), 3),
        "two_diarized_succeeded": sum(job["status"] == "succeeded" for job in ended),
        "two_diarized_wall_s": round(
            max(job["finished_at"] for job in ended) - min(job["created_at"] for job in ended), 1
        ),
    }


def diarize_hour_report(body: dict[str, Any]) -> str:
    alone, under = body["sync_alone"], body["sync_under_two_diarized"]
    return "\n".join(
        [
            f"a {body['minutes']} min meeting: plain {body['plain_s']} s, with words "
            f"{body['words_s']} s, diarized "
            f"{body['diarized_s']} s ({body['diarized_over_plain']}x); DER of its segments "
            f"{body['diarized']['der_collar_025_segments']} at 0.25 s",
            f"server memory: idle {body['idle_rss_mib']} MiB, peak growth plain "
            f"{body['plain_peak_growth_mib']} MiB, with words {body['words_peak_growth_mib']}"
            f" MiB, diarized {body['diarized_peak_growth_mib']}"
            f" MiB, two diarized at once {body['two_diarized_peak_growth_mib']} MiB",
            f"another key's sync answers: p95 {alone['p95_s']} s alone, {under['p95_s']} s "
            f"during two diarized meetings ({body['sync_p95_ratio']}x; {under['requests']} "
            f"requests), which took {body['two_diarized_wall_s']} s together",
            f"speaker passes alone: {body['passes_alone']}; under the sync requests: "
            f"{body['passes_under_sync']}",
        ]
    )
