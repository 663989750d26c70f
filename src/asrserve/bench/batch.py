"""``asrserve bench batch-api N``: the Batch API's throughput, and interactive latency under it.

Against one fresh server, in this order: a batch of N items alone (audio s per wall s from
creation to ``completed``, against the engine-only ceiling of ``bench/ceiling.py``), a
closed loop of one client sending short synchronous requests with nothing else running,
then the same loop while a second batch of N items is in progress (cancelled once the loop
ends).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from asrserve.bench.load import AudioFile, Pattern, run_load
from asrserve.bench.runner import policy_env, scheduler_delta
from asrserve.bench.wer import wer
from asrserve.cli.server_process import ServerProcess

FIELDS = {"model": "whisper-1", "response_format": "json"}
POLL_S = 0.25
BATCH_TIMEOUT_S = 4 * 3600.0
TARGET_X_CEILING = 0.9  # batch alone: at least this share of the ceiling
TARGET_P95_RATIO = 2.0  # interactive p95 under batch load: at most this × idle p95

Batch = dict[str, Any]


@dataclass(frozen=True)
class BatchScenario:
    items: int  # requests per batch; they cycle through the corpus clips
    probes: int  # synchronous requests per interactive loop
    policy: str = "greedy"
    server_env: dict[str, str] | None = None
    url: str | None = None  # an already running server instead of a fresh one
    probe_max_seconds: float = 10.0  # interactive requests use the clips up to this long


@dataclass(frozen=True)
class Clips:
    """The corpus clips uploaded once (``purpose=audio``), and each item's clip."""

    ids: dict[Path, str]
    order: list[AudioFile]

    @property
    def audio_s(self) -> float:
        return sum(f.duration for f in self.order)


def measure_batch(
    files: list[AudioFile], scenario: BatchScenario, ceiling: float
) -> dict[str, Any]:
    """Batch alone, interactive idle, interactive under batch: the ``batch`` report
    (``ceiling``: the engine's best audio s per wall s on the same files)."""
    probes = [f for f in files if f.duration <= scenario.probe_max_seconds]
    probes = probes or [min(files, key=lambda f: f.duration)]
    with _server(scenario) as url, httpx.Client(base_url=url, timeout=600) as client:
        asyncio.run(run_load(url, files[:2], Pattern(requests=2), FIELDS))  # warm-up
        order = [files[i % len(files)] for i in range(scenario.items)]
        clips = Clips(_upload_audio(client, order), order)
        alone = _batch_alone(client, clips, ceiling)
        idle = _interactive(client, probes, scenario.probes)
        loaded = _under_batch(client, clips, probes, scenario.probes, idle)
    ratio = _ratio(loaded["p95_s"], idle["p95_s"])
    return {
        "policy": scenario.policy,
        "items": scenario.items,
        "probes": scenario.probes,
        "probe_clips": len(probes),
        "probe_max_seconds": scenario.probe_max_seconds,
        "ceiling_audio_s_per_wall_s": round(ceiling, 3),
        "batch_alone": alone,
        "interactive_idle": idle,
        "interactive_under_batch": loaded,
        "p95_under_batch_over_idle": round(ratio, 3),
        "targets": {"batch_x_ceiling_min": TARGET_X_CEILING, "p95_ratio_max": TARGET_P95_RATIO},
    }


def _ratio(value: float | None, base: float | None) -> float:
    return value / base if value is not None and base else float("nan")


@contextmanager
def _server(scenario: BatchScenario) -> Iterator[str]:
    if scenario.url is not None:
        yield scenario.url
        return
    env = {**(scenario.server_env or {}), **policy_env(scenario.policy)}
    with tempfile.TemporaryDirectory(prefix="asrserve-bench-batch-") as tmp:
        server = ServerProcess(Path(tmp) / "data", env=env).start(timeout=120)
        try:
            yield server.url
        finally:
            server.stop()


# --- the Batch API, client side -------------------------------------------------------
def _upload_audio(client: httpx.Client, order: Sequence[AudioFile]) -> dict[Path, str]:
    """Each distinct clip once; batch lines name it by id as often as they need."""
    ids: dict[Path, str] = {}
    for file in order:
        if file.path not in ids:
            ids[file.path] = _upload(client, file.path.name, file.data, "audio")
    return ids


def _upload(client: httpx.Client, name: str, data: bytes, purpose: str) -> str:
    response = client.post("/v1/files", data={"purpose": purpose}, files={"file": (name, data)})
    response.raise_for_status()
    return str(response.json()["id"])


def _input_file(client: httpx.Client, clips: Clips) -> str:
    lines = [
        {
            "custom_id": f"item-{index}",
            "method": "POST",
            "url": "/v1/audio/transcriptions",
            "body": {"file": clips.ids[file.path], **FIELDS},
        }
        for index, file in enumerate(clips.order)
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return _upload(client, "bench-batch.jsonl", data, "batch")


def _create(client: httpx.Client, input_file_id: str) -> Batch:
    body = {
        "input_file_id": input_file_id,
        "endpoint": "/v1/audio/transcriptions",
        "completion_window": "24h",
    }
    response = client.post("/v1/batches", json=body)
    response.raise_for_status()
    batch: Batch = response.json()
    return batch


def _get(client: httpx.Client, batch_id: str) -> Batch:
    response = client.get(f"/v1/batches/{batch_id}")
    response.raise_for_status()
    batch: Batch = response.json()
    return batch


def _wait(
    client: httpx.Client,
    batch_id: str,
    until: Callable[[Batch], bool],
    timeout: float = BATCH_TIMEOUT_S,
) -> Batch:
    """Poll every ``POLL_S`` until ``until(batch)`` or the batch has ended."""
    deadline = time.monotonic() + timeout
    while True:
        batch = _get(client, batch_id)
        if until(batch) or _ended(batch):
            return batch
        if time.monotonic() > deadline:
            raise TimeoutError(f"batch {batch_id} still {batch['status']} after {timeout} s")
        time.sleep(POLL_S)  # a remote status; ?wait= answers only the end, `until` may be sooner


def _ended(batch: Batch) -> bool:
    return batch["status"] in ("completed", "failed", "expired", "cancelled")


def _done(batch: Batch) -> int:
    counts = batch["request_counts"]
    return int(counts["completed"]) + int(counts["failed"])


def _scheduler(client: httpx.Client) -> dict[str, Any]:
    body: dict[str, Any] = client.get("/v1/scheduler").json()
    return body


def _scheduler_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """Mean batch size and padding waste between two reads, and the batch-size histogram."""
    sizes = {
        size: count - before["batch_sizes"].get(size, 0)
        for size, count in after["batch_sizes"].items()
    }
    histogram = {size: count for size, count in sizes.items() if count}
    audio = after["audio_seconds"] - before["audio_seconds"]  # of chunks, as the scheduler counts
    return {
        **scheduler_delta(before, after),
        "batch_sizes": histogram,
        "scheduled_audio_s": round(audio, 2),
    }


# --- the three measurements ------------------------------------------------------------
def _batch_alone(client: httpx.Client, clips: Clips, ceiling: float) -> dict[str, Any]:
    input_id = _input_file(client, clips)
    before = _scheduler(client)
    start = time.monotonic()
    batch_id = _create(client, input_id)["id"]
    batch = _wait(client, batch_id, lambda b: False)
    wall = time.monotonic() - start
    scheduler = _scheduler_delta(before, _scheduler(client))
    throughput = clips.audio_s / wall
    counts = batch["request_counts"]
    return {
        "batch_id": batch_id,
        "status": batch["status"],
        "requests": counts["total"],
        "completed": counts["completed"],
        "failed": counts["failed"],
        "audio_s": round(clips.audio_s, 2),
        "server_audio_s": batch.get("audio_seconds"),
        "wall_s": round(wall, 3),
        "audio_s_per_wall_s": round(throughput, 3),
        "x_ceiling": round(throughput / ceiling, 3),
        "server_in_progress_to_completed_s": _span(batch, "in_progress_at", "completed_at"),
        "server_created_to_completed_s": _span(batch, "created_at", "completed_at"),
        **scheduler,
        "wer": _output_wer(client, batch, clips.order),
    }


def _span(batch: Batch, first: str, last: str) -> int | None:
    """Seconds between two of the batch's (whole-second) timestamps."""
    if batch.get(first) is None or batch.get(last) is None:
        return None
    return int(batch[last]) - int(batch[first])


def _output_wer(client: httpx.Client, batch: Batch, order: Sequence[AudioFile]) -> float | None:
    """WER of the batch's output file against the references of the items' clips."""
    if batch.get("output_file_id") is None:
        return None
    response = client.get(f"/v1/files/{batch['output_file_id']}/content")
    response.raise_for_status()
    refs: list[str] = []
    hyps: list[str] = []
    for raw in response.text.splitlines():
        line = json.loads(raw)
        file = order[int(line["custom_id"].removeprefix("item-"))]
        if file.reference is not None and line["response"]["status_code"] == 200:
            refs.append(file.reference)
            hyps.append(str(line["response"]["body"].get("text", "")))
    return round(wer(refs, hyps), 4) if refs else None


@dataclass(frozen=True)
class Probe:
    latency: float
    status: int
    batch_running: bool  # the batch under way was still in progress when the reply came


def _interactive(
    client: httpx.Client, probes: list[AudioFile], requests: int, batch_id: str | None = None
) -> dict[str, Any]:
    """One client, one synchronous request at a time (``requests`` of them, cycling through
    ``probes``). With ``batch_id``, the batch's status is read after each reply."""
    before = _scheduler(client)
    samples: list[Probe] = []
    start = time.perf_counter()
    for index in range(requests):
        samples.append(_probe(client, probes[index % len(probes)], batch_id))
    wall = time.perf_counter() - start
    loop = {**_latencies(samples), "wall_s": round(wall, 3)}
    return {**loop, **_scheduler_delta(before, _scheduler(client))}


def _probe(client: httpx.Client, file: AudioFile, batch_id: str | None) -> Probe:
    start = time.perf_counter()
    response = client.post(
        "/v1/audio/transcriptions", data=FIELDS, files={"file": (file.path.name, file.data)}
    )
    latency = time.perf_counter() - start
    running = batch_id is not None and _get(client, batch_id)["status"] == "in_progress"
    return Probe(latency, response.status_code, running)


def _latencies(samples: list[Probe]) -> dict[str, Any]:
    ok = [s.latency for s in samples if s.status == 200]
    return {
        "requests": len(samples),
        "errors": len(samples) - len(ok),
        **_percentiles_of(ok),
        **_spread_of(ok),
        "latencies_s": [round(s.latency, 3) for s in samples],
        "batch_running": [s.batch_running for s in samples],
    }


def _percentiles_of(latencies: list[float]) -> dict[str, float | None]:
    return {
        f"p{q}_s": round(float(np.percentile(latencies, q)), 3) if latencies else None
        for q in (50, 95, 99)
    }


def _spread_of(latencies: list[float]) -> dict[str, float | None]:
    if not latencies:
        return {"min_s": None, "median_s": None, "max_s": None}
    return {
        "min_s": round(min(latencies), 3),
        "median_s": round(float(np.median(latencies)), 3),
        "max_s": round(max(latencies), 3),
    }


def _under_batch(
    client: httpx.Client,
    clips: Clips,
    probes: list[AudioFile],
    requests: int,
    idle: dict[str, Any],
) -> dict[str, Any]:
    """The interactive loop while a second batch is in progress; the batch is then cancelled.
    The batch's progress during the loop is the audio the scheduler ran beyond what the same
    probes made it run in the ``idle`` loop."""
    input_id = _input_file(client, clips)
    batch_id = _create(client, input_id)["id"]
    started = _wait(client, batch_id, lambda b: b["status"] != "validating", timeout=600)
    measured = _interactive(client, probes, requests, batch_id)
    at_end = _get(client, batch_id)
    valid = at_end["status"] == "in_progress"
    if valid:
        client.post(f"/v1/batches/{batch_id}/cancel").raise_for_status()
    final = _wait(client, batch_id, lambda b: False, timeout=600)
    during = [
        latency
        for latency, running in zip(measured["latencies_s"], measured["batch_running"], strict=True)
        if running
    ]
    return {
        **measured,
        "batch_id": batch_id,
        "batch_total": at_end["request_counts"]["total"],
        "batch_done_at_start": _done(started),
        "batch_done_at_end": _done(at_end),
        "batch_status_at_end": at_end["status"],
        "valid": valid,
        "batch_final_status": final["status"],
        "batch_final_done": _done(final),
        "while_running": {"requests": len(during), **_percentiles_of(during)},
        **_progress(measured, idle),
    }


def _progress(loop: dict[str, Any], idle: dict[str, Any]) -> dict[str, float]:
    audio = loop["scheduled_audio_s"] - idle["scheduled_audio_s"]
    return {
        "batch_audio_s_during_loop": round(audio, 2),
        "batch_audio_s_per_wall_s_during_loop": round(audio / loop["wall_s"], 3),
    }


# --- the table ----------------------------------------------------------------------------
def batch_report(body: dict[str, Any]) -> str:
    alone = body["batch_alone"]
    idle = body["interactive_idle"]
    loaded = body["interactive_under_batch"]
    ratio = body["p95_under_batch_over_idle"]
    x_ceiling = alone["x_ceiling"]
    ceiling = body["ceiling_audio_s_per_wall_s"]
    rows = [
        ("ceiling (engine only, best layout, same clips)", f"{ceiling:.2f} audio s / wall s", ""),
        (
            f"batch alone: {alone['completed']}/{alone['requests']} completed, "
            f"{alone['failed']} failed, {alone['audio_s']:.1f} audio s in {alone['wall_s']:.1f} s",
            f"{alone['audio_s_per_wall_s']:.2f} audio s / wall s",
            "",
        ),
        (
            "batch alone × ceiling",
            f"**{x_ceiling:.2f}×**",
            _target(x_ceiling >= TARGET_X_CEILING, f"≥ {TARGET_X_CEILING}×"),
        ),
        (
            "batch alone: server in_progress_at → completed_at",
            f"{alone['server_in_progress_to_completed_s']} s",
            "",
        ),
        (
            "batch alone: mean batch / padding / WER",
            f"{alone['mean_batch_size']} / {alone['padding_waste']} / {alone['wer']}",
            "",
        ),
        (_loop_label("interactive idle", idle, body), _percentiles(idle), ""),
        (_loop_label("interactive under batch", loaded, body), _percentiles(loaded), ""),
        (
            "under-batch p95 / idle p95",
            f"**{ratio:.2f}×**",
            _target(ratio <= TARGET_P95_RATIO, f"≤ {TARGET_P95_RATIO:g}×"),
        ),
        (
            f"under batch, only the {loaded['while_running']['requests']} replies that came "
            "while the batch was in progress: p50 / p95 / p99",
            _percentiles(loaded["while_running"]),
            "",
        ),
        ("under batch: latency min / median / max", _spread(loaded), ""),
        ("under batch: mean batch / padding", _sched(loaded), ""),
        (
            f"under batch: the batch's progress during the loop ({loaded['wall_s']:.1f} s)",
            f"{loaded['batch_audio_s_during_loop']:.1f} audio s, "
            f"{loaded['batch_audio_s_per_wall_s_during_loop']:.2f} audio s / wall s",
            "",
        ),
        ("under batch: second batch when the loop ended", _validity(loaded), ""),
    ]
    lines = ["| measure | value | target |", "|---|---|---|"]
    lines.extend(f"| {a} | {b} | {c} |" for a, b, c in rows)
    return "\n".join(lines)


def _target(met: bool, text: str) -> str:
    return f"{text} ({'met' if met else 'MISSED'})"


def _loop_label(name: str, loop: dict[str, Any], body: dict[str, Any]) -> str:
    return (
        f"{name}: 1 client, {loop['requests']} req ({loop['errors']} err), "
        f"clips ≤ {body['probe_max_seconds']:g} s: p50 / p95 / p99"
    )


def _percentiles(loop: dict[str, Any]) -> str:
    return " / ".join(_seconds(loop[f"p{q}_s"]) for q in (50, 95, 99)) + " s"


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _spread(loop: dict[str, Any]) -> str:
    return f"{loop['min_s']} / {loop['median_s']} / {loop['max_s']} s"


def _sched(loop: dict[str, Any]) -> str:
    return f"{loop['mean_batch_size']} / {loop['padding_waste']}"


def _validity(loop: dict[str, Any]) -> str:
    state = (
        f"{loop['batch_status_at_end']}, {loop['batch_done_at_end']}/{loop['batch_total']} "
        f"items done ({loop['batch_done_at_start']} at the loop's start)"
    )
    if loop["valid"]:
        return state
    return f"{state}: **INVALID**, the batch finished before the loop did"
