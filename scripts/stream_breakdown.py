"""Where a streamed answer's first-delta time goes: staged decode vs the whole file first.

    PYTHONPATH=src .venv/bin/python scripts/stream_breakdown.py SECONDS [ROUNDS]

The bench files joined into one file of about SECONDS (as ``asrserve bench stream`` makes
it); two fresh servers, one as configured and one with ``ASRSERVE_STAGED_DECODE=false``,
each asked ROUNDS streamed answers in turn. Each answer's time from the request's start is
split with the scheduler's ``batch`` log line of the job's first window: until that window
was submitted (upload, intake, decode and speech search of what it needs, its features),
its wait for a device, its forward pass, and the delivery of its text to the client.
"""

from __future__ import annotations

import calendar
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from asrserve.bench.runner import load_audio
from asrserve.bench.stream import TIMEOUT, long_file, plain
from asrserve.cli.server_process import ServerProcess

SIDES = {"staged": {}, "whole file first": {"ASRSERVE_STAGED_DECODE": "false"}}


def _epoch(stamp: str) -> float:
    """``2026-12-05T14:04:10.123Z`` as seconds since the epoch."""
    return calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + int(stamp[20:23]) / 1e3


def _streamed(client: httpx.Client, path: Path) -> tuple[str, float, float, float]:
    """(job id, start, first delta, done) of one streamed answer, wall clock."""
    start, first = time.time(), None
    with (
        path.open("rb") as audio,
        client.stream(
            "POST",
            "/v1/audio/transcriptions",
            files={"file": (path.name, audio)},
            data={"model": "whisper-1", "stream": "true"},
        ) as response,
    ):
        job = response.headers["x-job-id"]
        for line in response.iter_lines():
            if first is None and '"transcript.text.delta"' in line:
                first = time.time()
    done = time.time()
    return job, start, first if first is not None else done, done


def _first_batch(server: ServerProcess, job: str) -> tuple[float, float, float]:
    """(submitted, started, finished) of the job's first forward pass, from the log."""
    assert server.log_path is not None
    passes = []
    for line in server.log_path.read_text().splitlines():
        record: dict[str, Any] = json.loads(line) if line.startswith("{") else {}
        if record.get("msg") == "batch" and job in record.get("jobs", []):
            finished = _epoch(record["ts"])
            started = finished - record["compute_ms"] / 1e3
            passes.append((started - record["wait_ms"] / 1e3, started, finished))
    return min(passes)


def main(seconds: float, rounds: int) -> None:
    rows: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="asrserve-breakdown-") as tmp:
        path, duration = long_file(load_audio(None, None), seconds, Path(tmp))
        servers = {
            side: ServerProcess(Path(tmp) / side.replace(" ", "-"), env=env).start(timeout=180)
            for side, env in SIDES.items()
        }
        clients = {
            side: httpx.Client(base_url=s.url, timeout=TIMEOUT) for side, s in servers.items()
        }
        try:
            for client in clients.values():
                plain(client, path)  # warm-up
            for _ in range(rounds):
                for side, client in clients.items():
                    job, start, first, done = _streamed(client, path)
                    time.sleep(0.3)  # the log line is written as the pass ends
                    submitted, began, finished = _first_batch(servers[side], job)
                    rows[side].append(
                        {
                            "to submit": submitted - start,
                            "wait": began - submitted,
                            "first window": finished - began,
                            "delivery": first - finished,
                            "first delta": first - start,
                            "done": done - start,
                        }
                    )
        finally:
            for client in clients.values():
                client.close()
            for server in servers.values():
                server.stop()
    print(f"one file of {duration:.1f} s, {rounds} round(s); seconds, median [min–max]")
    for side, runs in rows.items():
        parts = [
            f"{name} {statistics.median(r[name] for r in runs):.2f}"
            f" [{min(r[name] for r in runs):.2f}–{max(r[name] for r in runs):.2f}]"
            for name in runs[0]
        ]
        print(f"  {side}: " + "; ".join(parts))


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3)
