"""``asrserve bench soak SECONDS``: hours-long behaviour in minutes of reading.

One fresh server. First its capacity (audio s per wall s, a closed loop of
:data:`CAPACITY_CLIENTS` clients, which also warms it up); then an open-loop Poisson stream of
synchronous requests offering ``--soak-load`` × that capacity for SECONDS, while the server's
resident memory (``/proc/<pid>/status``) is sampled every few seconds.

The report gives, per minute: requests, errors, latency p50/p95/p99, audio s per s served,
and the largest RSS; then RSS growth from the first minute after a warm-up (the first fifth
of the run) to the last, and its trend. The run fails (exit status 1) on any error (anything
but 200, a timeout included) or when RSS grew by more than :data:`RSS_GROWTH_FRACTION` of the
baseline or :data:`RSS_GROWTH_BYTES`, whichever is less.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from asrserve.bench.load import AudioFile, Pattern, limits, run_load
from asrserve.cli.server_process import ServerProcess

MIB = 1024 * 1024
CAPACITY_CLIENTS = 16
RSS_GROWTH_FRACTION = 0.20
RSS_GROWTH_BYTES = 200 * MIB
WARM_UP_SHARE = 0.2
FIELDS = {"model": "whisper-1", "response_format": "json"}


@dataclass(frozen=True)
class SoakConfig:
    seconds: float
    load: float = 0.8
    seed: int = 0
    client_timeout_s: float = 300.0
    server_env: dict[str, str] = field(default_factory=dict)

    @property
    def window_s(self) -> float:
        """Report windows: minutes, or halves of a run shorter than two minutes."""
        return 60.0 if self.seconds >= 120 else max(self.seconds / 2, 1.0)

    @property
    def sample_every_s(self) -> float:
        return min(5.0, max(self.window_s / 5, 0.5))


@dataclass(frozen=True)
class SoakOutcome:
    start: float  # when it was due, seconds after the soak began (all within the soak)
    latency: float
    status: int  # 0: no answer (timeout, connection error)
    audio_s: float
    detail: str = ""


def rss_bytes(pid: int, field: str = "VmRSS") -> int:
    """A memory figure of a process from /proc (VmRSS, or VmHWM: its peak), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} for process {pid}")


class RssSampler:
    """(seconds since ``origin``, VmRSS) of a process every ``period`` s, in a thread."""

    def __init__(self, pid: int, period: float, origin: float) -> None:
        self.pid, self.period, self.origin = pid, period, origin
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append((time.monotonic() - self.origin, rss_bytes(self.pid)))
            if self._stop.wait(self.period):
                return

    @property
    def peak(self) -> int:
        return max((rss for _, rss in self.samples), default=0)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)


def measure_capacity(url: str, files: list[AudioFile]) -> dict[str, Any]:
    """Audio seconds per wall second under a closed loop that keeps the server saturated."""
    asyncio.run(run_load(url, files[:2], Pattern(requests=2), FIELDS))  # warm-up
    pattern = Pattern(requests=max(2 * CAPACITY_CLIENTS, len(files)), concurrency=CAPACITY_CLIENTS)
    result = asyncio.run(run_load(url, files, pattern, FIELDS))
    errors = len(result.samples) - len(result.ok)
    if errors or not result.audio_per_wall:
        raise RuntimeError(f"capacity run failed: {errors} errors of {len(result.samples)}")
    return {
        "pattern": pattern.describe(),
        "requests": len(result.samples),
        "wall_s": round(result.wall, 2),
        "audio_s_per_s": round(result.audio_per_wall, 3),
    }


async def _send(
    client: httpx.AsyncClient, file: AudioFile, origin: float, at: float
) -> SoakOutcome:
    """``file`` sent at ``at`` s after ``origin``. Its latency counts from then, not from
    when the client got to it: a client running late adds to latency, as a user's would."""
    due = origin + at
    await asyncio.sleep(max(due - time.monotonic(), 0.0))
    files = {"file": (file.path.name, file.data)}
    try:
        resp = await client.post("/v1/audio/transcriptions", data=FIELDS, files=files)
    except httpx.HTTPError as exc:
        return SoakOutcome(at, time.monotonic() - due, 0, file.duration, f"{type(exc).__name__}")
    latency = time.monotonic() - due
    detail = "" if resp.status_code == 200 else resp.text[:200]
    return SoakOutcome(at, latency, resp.status_code, file.duration, detail)


def arrivals(
    files: list[AudioFile], rate: float, seconds: float, seed: int
) -> list[tuple[float, AudioFile]]:
    """(offset s, file) pairs of a Poisson process of ``rate`` per s over ``seconds``."""
    rng = random.Random(seed)
    plan: list[tuple[float, AudioFile]] = []
    at = rng.expovariate(rate)
    while at < seconds:
        plan.append((at, rng.choice(files)))
        at += rng.expovariate(rate)
    return plan


async def open_loop(
    url: str, plan: list[tuple[float, AudioFile]], timeout: float, origin: float
) -> list[SoakOutcome]:
    """Every planned request sent at its time, whatever the state of the earlier ones."""
    pool = limits(1024, keepalive=64)
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=pool) as client:
        tasks = [_send(client, file, origin, at) for at, file in plan]
        return list(await asyncio.gather(*tasks))


def _percentiles(latencies: list[float]) -> dict[str, float | None]:
    if not latencies:
        return {"p50_s": None, "p95_s": None, "p99_s": None}
    values = np.percentile(latencies, [50, 95, 99])
    return {f"p{q}_s": round(float(v), 3) for q, v in zip((50, 95, 99), values, strict=True)}


def windows(
    outcomes: list[SoakOutcome], samples: list[tuple[float, int]], config: SoakConfig
) -> list[dict[str, Any]]:
    """Per window of arrivals: counts, latency percentiles, audio served, largest RSS."""
    size = config.window_s
    count = max(1, int(np.ceil(config.seconds / size - 1e-9)))
    rows = []
    for index in range(count):
        low, high = index * size, (index + 1) * size
        mine = [o for o in outcomes if low <= o.start < high]
        ok = [o for o in mine if o.status == 200]
        rss = [value for at, value in samples if low <= at < high]
        rows.append(
            {
                "start_s": round(low, 1),
                "requests": len(mine),
                "errors": len(mine) - len(ok),
                **_percentiles([o.latency for o in ok]),
                "audio_s_per_s": round(sum(o.audio_s for o in ok) / size, 3),
                "rss_max_mib": round(max(rss) / MIB, 1) if rss else None,
                "rss_median_mib": round(statistics.median(rss) / MIB, 1) if rss else None,
            }
        )
    return rows


def rss_growth(rows: list[dict[str, Any]], samples: list[tuple[float, int]]) -> dict[str, Any]:
    """Median RSS of the first window after the warm-up against the last window's; the bound
    and whether it held. A burst can lift the plateau early on (the allocator keeps what it
    got), so the baseline is taken once :data:`WARM_UP_SHARE` of the run has passed."""
    medians = [(row["start_s"], row["rss_median_mib"]) for row in rows]
    medians = [(start, value) for start, value in medians if value is not None]
    if not medians:
        return {"ok": False, "growth_mib": None, "bound_mib": None}
    since, base = medians[min(len(medians) - 1, int(len(medians) * WARM_UP_SHARE))]
    first, last = medians[0][1], medians[-1][1]
    bound = min(base * RSS_GROWTH_FRACTION, RSS_GROWTH_BYTES / MIB)
    return {
        "first_mib": first,
        "baseline_from_s": since,
        "baseline_mib": base,
        "last_mib": last,
        "max_mib": round(max(value for _, value in samples) / MIB, 1),
        "growth_mib": round(last - base, 1),
        "growth_from_first_mib": round(last - first, 1),
        "trend_mib_per_h": _trend([(t, v) for t, v in samples if t >= since]),
        "bound_mib": round(bound, 1),
        "ok": last - base <= bound,
    }


def _trend(samples: list[tuple[float, int]]) -> float | None:
    """Least-squares slope of RSS over time, MiB per hour."""
    if len(samples) < 2:
        return None
    times, values = zip(*samples, strict=True)
    slope = np.polyfit(np.asarray(times), np.asarray(values) / MIB, 1)[0]
    return round(float(slope) * 3600, 1)


def summarize(
    config: SoakConfig,
    capacity: dict[str, Any],
    rate: float,
    outcomes: list[SoakOutcome],
    samples: list[tuple[float, int]],
) -> dict[str, Any]:
    rows = windows(outcomes, samples, config)
    errors = [o for o in outcomes if o.status != 200]
    rss = rss_growth(rows, samples)
    ok = [o.latency for o in outcomes if o.status == 200]
    return {
        "seconds": config.seconds,
        "load": config.load,
        "capacity": capacity,
        "offered": {
            "requests_per_s": round(rate, 3),
            "audio_s_per_s": round(config.load * capacity["audio_s_per_s"], 3),
        },
        "requests": len(outcomes),
        "errors": len(errors),
        "error_samples": [f"{o.status} {o.detail}" for o in errors[:5]],
        "latency": _percentiles(ok),
        "windows": rows,
        "rss": rss,
        "rss_samples": [(round(t, 1), round(value / MIB, 1)) for t, value in samples],
        "passed": not errors and rss["ok"] and bool(outcomes),
    }


def soak(files: list[AudioFile], config: SoakConfig) -> dict[str, Any]:
    """The whole run on a fresh server of its own; the report as a dict."""
    with tempfile.TemporaryDirectory(prefix="asrserve-soak-") as tmp:
        server = ServerProcess(Path(tmp) / "data", env=config.server_env).start(timeout=120)
        assert server.proc is not None
        try:
            capacity = measure_capacity(server.url, files)
            mean_audio = sum(f.duration for f in files) / len(files)
            rate = config.load * capacity["audio_s_per_s"] / mean_audio
            plan = arrivals(files, rate, config.seconds, config.seed)
            print(
                f"capacity {capacity['audio_s_per_s']:.2f} audio s/s; soak: {len(plan)} requests "
                f"at {rate:.2f}/s ({config.load:g} × capacity) for {config.seconds:g} s",
                flush=True,
            )
            origin = time.monotonic()
            with RssSampler(server.proc.pid, config.sample_every_s, origin) as sampler:
                outcomes = asyncio.run(open_loop(server.url, plan, config.client_timeout_s, origin))
        finally:
            server.stop()
    return summarize(config, capacity, rate, outcomes, sampler.samples)


def soak_report(body: dict[str, Any]) -> str:
    lines = [
        f"soak {body['seconds']:g} s at {body['load']:g} × capacity "
        f"({body['capacity']['audio_s_per_s']:.2f} audio s/s, {body['capacity']['pattern']}): "
        f"{body['offered']['requests_per_s']:.2f} req/s, "
        f"{body['offered']['audio_s_per_s']:.2f} audio s/s offered",
        "",
        "| from s | req | err | p50 s | p95 s | p99 s | audio s/s | RSS max MiB |",
        "|" + "---|" * 8,
    ]
    for row in body["windows"]:
        lines.append(
            f"| {row['start_s']:g} | {row['requests']} | {row['errors']} | {row['p50_s']} "
            f"| {row['p95_s']} | {row['p99_s']} | {row['audio_s_per_s']:.2f} "
            f"| {row['rss_max_mib']} |"
        )
    rss = body["rss"]
    lines += [
        "",
        f"requests {body['requests']}, errors {body['errors']}; latency p50 "
        f"{body['latency']['p50_s']} s, p95 {body['latency']['p95_s']} s, "
        f"p99 {body['latency']['p99_s']} s",
        f"RSS after warm-up (from {rss['baseline_from_s']:g} s) {rss['baseline_mib']} MiB, "
        f"last {rss['last_mib']} MiB, max {rss['max_mib']} MiB: growth {rss['growth_mib']} MiB "
        f"(bound {rss['bound_mib']}; {rss['growth_from_first_mib']} from the first window), "
        f"trend {rss['trend_mib_per_h']} MiB/h",
        f"soak {'PASSED' if body['passed'] else 'FAILED'}",
    ]
    lines += [f"  error: {sample}" for sample in body["error_samples"]]
    return "\n".join(lines)


def run_soak(
    files: list[AudioFile], config: SoakConfig, json_path: Path | None, meta: dict[str, Any]
) -> int:
    body = soak(files, config)
    print(soak_report(body))
    if json_path is not None:
        json_path.write_text(json.dumps({"meta": meta, "soak": body}, indent=2), "utf-8")
    return 0 if body["passed"] else 1
