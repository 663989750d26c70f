"""``asrserve bench distributed``: distributed shapes against the embedded server.

In one run, against one throwaway ``redis-server``: the embedded server (``asrserve serve``,
1 replica × 2 threads), then one API node with one worker node of 2 threads, then one API
node with two worker nodes of 1 thread each (every shape under its own Redis key prefix).
Each gets the bench's load patterns over the corpus; the embedded server and the 1 × 2
deployment also get the *hop probe*: one client sending one short clip synchronously, one
request after the other, so that the difference of their medians is what the way through
Redis (upload → blob → stream → worker → result → pub/sub → API) adds to a lone request.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from asrserve.bench.load import AudioFile, LoadResult, Pattern, run_load
from asrserve.bench.redis_process import RedisProcess
from asrserve.bench.runner import Row, _wer, report, scheduler_delta
from asrserve.cli.server_process import ServerProcess, WorkerProcess

FIELDS = {"model": "whisper-1", "response_format": "json"}
EMBEDDED = "embedded 1×2"
DIST_1X2 = "distributed 1×2"
DIST_2X1 = "distributed 2×1"
STOP_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Shape:
    """``workers`` worker node processes (0: the embedded server) of ``threads`` each."""

    label: str
    workers: int
    threads: int
    probe: bool  # also run the hop probe against it

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "-", self.label.replace("×", "x")).strip("-")


SHAPES = (
    Shape(EMBEDDED, 0, 2, probe=True),
    Shape(DIST_1X2, 1, 2, probe=True),
    Shape(DIST_2X1, 2, 1, probe=False),
)


@dataclass(frozen=True)
class DistributedConfig:
    patterns: Sequence[Pattern]
    server_env: dict[str, str]  # bench flags (beam size, ...); the CPU split is the shape's
    probes: int = 30  # hop probe: sequential requests after a warm-up of two
    probe_seconds: float = 5.0  # hop probe: the corpus clip closest to this long


def measure_distributed(
    files: list[AudioFile], config: DistributedConfig
) -> tuple[list[Row], dict[str, Any]]:
    """Every shape in turn: its load rows, and the hop probe where the shape asks for it."""
    clip = min(files, key=lambda f: abs(f.duration - config.probe_seconds))
    rows: list[Row] = []
    hops: dict[str, LoadResult] = {}
    with tempfile.TemporaryDirectory(prefix="asrserve-bench-distributed-") as tmp:
        redis = RedisProcess(Path(tmp) / "redis").start()
        try:
            for shape in SHAPES:
                with _deployment(
                    shape, config.server_env, Path(tmp) / shape.slug, redis.url
                ) as url:
                    rows.extend(_load_rows(url, shape.label, files, config.patterns))
                    if shape.probe:
                        hops[shape.label] = _hop_probe(url, clip, config.probes)
                print(f"  {shape.label}: done", flush=True)
        finally:
            redis.stop()
    return rows, _body(rows, hops, clip, config)


@contextmanager
def _deployment(shape: Shape, bench_env: dict[str, str], root: Path, broker: str) -> Iterator[str]:
    """The shape's processes, stopped on the way out (exception and Ctrl-C included)."""
    env = {
        **bench_env,
        "ASRSERVE_CPU_REPLICAS": "1",
        "ASRSERVE_CPU_THREADS": str(shape.threads),
        "ASRSERVE_RECORD_TRAFFIC": "false",
    }
    if shape.workers:
        env |= {
            "ASRSERVE_BROKER": broker,
            "ASRSERVE_REDIS_PREFIX": f"bench-{shape.slug}",
            "ASRSERVE_SHARED_DIR": str(root / "shared"),
        }
    api = ServerProcess(root / "api", env=env)
    processes: list[ServerProcess] = [api]
    try:
        api.start(timeout=120)
        for index in range(shape.workers):
            processes.append(WorkerProcess(root / f"worker-{index}", env=env))
            processes[-1].start()
        yield api.url
    finally:
        _stop_all(processes)


def _stop_all(processes: list[ServerProcess], timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM to all at once, then SIGKILL to any still running after ``timeout``
    (after Ctrl-C, Redis may be gone and a draining worker wait for it in vain)."""
    running = [p.proc for p in processes if p.proc is not None and p.proc.poll() is None]
    for proc in running:
        proc.terminate()
    deadline = time.monotonic() + timeout
    for proc in running:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _load_rows(
    url: str, label: str, files: list[AudioFile], patterns: Sequence[Pattern]
) -> list[Row]:
    asyncio.run(run_load(url, files[:2], Pattern(requests=2, concurrency=2), FIELDS))  # warm-up
    rows = []
    for pattern in patterns:
        before = _scheduler(url)
        result = asyncio.run(run_load(url, files, pattern, FIELDS))
        after = _scheduler(url)
        batching = scheduler_delta(before, after) if before and after else {}
        rows.append(Row(label, pattern.describe(), result, batching, _wer(result)))
    return rows


def _scheduler(url: str) -> dict[str, Any] | None:
    """The batch counters of an embedded server. An API node only merges the workers'
    reports, sent a third of a lease apart: too stale to take a delta of."""
    view: dict[str, Any] = httpx.get(f"{url}/v1/scheduler", timeout=30).json()
    return view if view.get("mode") == "embedded" else None


def _hop_probe(url: str, clip: AudioFile, probes: int) -> LoadResult:
    asyncio.run(run_load(url, [clip], Pattern(requests=2), FIELDS))  # warm-up
    return asyncio.run(run_load(url, [clip], Pattern(requests=probes), FIELDS))


def _body(
    rows: list[Row], hops: dict[str, LoadResult], clip: AudioFile, config: DistributedConfig
) -> dict[str, Any]:
    embedded, distributed = _latency(hops[EMBEDDED]), _latency(hops[DIST_1X2])
    return {
        "shapes": [
            {"label": s.label, "worker_processes": s.workers, "threads_per_process": s.threads}
            for s in SHAPES
        ],
        "ratios": _ratios(rows),
        "hop": {
            "clip": clip.path.name,
            "clip_s": round(clip.duration, 2),
            "probes": config.probes,
            "embedded": embedded,
            "distributed_1x2": distributed,
            "added_p50_s": _diff(distributed["p50_s"], embedded["p50_s"]),
            "added_min_s": _diff(distributed["min_s"], embedded["min_s"]),
        },
    }


def _latency(result: LoadResult) -> dict[str, Any]:
    latencies = [s.latency for s in result.ok]
    return {
        "requests": len(result.samples),
        "errors": len(result.samples) - len(result.ok),
        "p50_s": round(result.percentile(50), 4),
        "p95_s": round(result.percentile(95), 4),
        "min_s": round(min(latencies), 4) if latencies else None,
    }


def _diff(value: float | None, base: float | None) -> float | None:
    return None if value is None or base is None else round(value - base, 4)


def _ratios(rows: list[Row]) -> dict[str, dict[str, float | None]]:
    """Per load pattern: 2×1 over 1×2 (distributed), and distributed 1×2 over embedded."""
    by = {(row.policy, row.pattern): row.result.audio_per_wall for row in rows}
    ratios = {}
    for pattern in dict.fromkeys(row.pattern for row in rows):
        ratios[pattern] = {
            "2x1_over_1x2": _ratio(by.get((DIST_2X1, pattern)), by.get((DIST_1X2, pattern))),
            "distributed_1x2_over_embedded": _ratio(
                by.get((DIST_1X2, pattern)), by.get((EMBEDDED, pattern))
            ),
        }
    return ratios


def _ratio(value: float | None, base: float | None) -> float | None:
    return round(value / base, 3) if value is not None and base else None


def distributed_report(rows: list[Row], body: dict[str, Any]) -> str:
    lines = [report(rows, None, EMBEDDED), ""]
    for pattern, ratio in body["ratios"].items():
        lines.append(
            f"{pattern}: throughput 2×1 / 1×2 (distributed) {_times(ratio['2x1_over_1x2'])}, "
            f"distributed 1×2 / embedded {_times(ratio['distributed_1x2_over_embedded'])}"
        )
    hop = body["hop"]
    lines += [
        "",
        f"Redis hop, 1 client, {hop['probes']} sequential requests of {hop['clip']} "
        f"({hop['clip_s']} s):",
        "| deployment | req | err | p50 s | p95 s | min s |",
        "|---|---|---|---|---|---|",
    ]
    for label, key in ((EMBEDDED, "embedded"), (DIST_1X2, "distributed_1x2")):
        d = hop[key]
        lines.append(
            f"| {label} | {d['requests']} | {d['errors']} | {d['p50_s']} | {d['p95_s']} "
            f"| {d['min_s']} |"
        )
    lines.append(f"added by the hop: p50 {hop['added_p50_s']} s, min {hop['added_min_s']} s")
    return "\n".join(lines)


def _times(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"
