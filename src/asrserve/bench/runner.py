"""Side-by-side benchmark: each policy against its own fresh server, in one invocation."""

from __future__ import annotations

import asyncio
import json
import platform
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from asrserve.audio.decode import decode
from asrserve.bench.ceiling import Ceiling
from asrserve.bench.corpus import build_corpus, load_refs
from asrserve.bench.cpu_split import split, split_table
from asrserve.bench.load import AudioFile, LoadResult, Pattern, run_load
from asrserve.bench.wer import wer
from asrserve.cli.server_process import ServerProcess
from asrserve.engine.layout import usable_cores
from asrserve.settings import ENV_PREFIX, Settings

AUDIO_SUFFIXES = {".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".webm", ".mp4"}
# The settings a report's ``meta.settings`` records, defaults included: those that move its
# figures. A row's ``POLICY@RxT/WINDOW`` sets the policy, layout and window mode of its server.
REPORTED_SETTINGS = (
    "models",
    "model",
    "engine",
    "device",
    "compute_type",
    "cpu_replicas",
    "cpu_threads",
    "beam_size",
    "fallback_temperatures",
    "encoder_window",
    "encoder_windows_s",
    "first_window_s",
    "vad_filter",
    "staged_decode",
    "batch_policy",
    "max_batch_size",
    "max_wait_ms",
    "max_queue_age_s",
    "fill_wait_share",
    "offline_ride_share",
    "offline_holdoff_ms",
)


@dataclass(frozen=True)
class BenchConfig:
    policies: Sequence[str]
    patterns: Sequence[Pattern]
    server_env: dict[str, str]
    url: str | None = None
    ceiling: bool = False  # also measure the engine alone (bench/ceiling.py)
    windows: Sequence[str | None] = (None,)  # encoder window modes to compare; None: default
    engines: Sequence[str | None] = (None,)  # engines to compare (bench/engines.py); None: set


@dataclass(frozen=True)
class Row:
    policy: str
    pattern: str
    result: LoadResult
    scheduler: dict[str, Any]
    wer: float | None
    engine: str | None = None  # the engine its server ran on, where the run compared them

    @property
    def label(self) -> str:
        return self.policy if self.engine is None else f"{self.policy} ({self.engine})"

    def as_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "policy": self.policy,
            **({} if self.engine is None else {"engine": self.engine}),
            "pattern": self.pattern,
            "requests": len(r.samples),
            "errors": len(r.samples) - len(r.ok),
            "wall_s": round(r.wall, 3),
            "audio_s_per_wall_s": round(r.audio_per_wall, 3),
            "requests_per_s": round(r.requests_per_s, 3),
            "p50_s": round(r.percentile(50), 3),
            "p95_s": round(r.percentile(95), 3),
            "p99_s": round(r.percentile(99), 3),
            "mean_batch_size": self.scheduler.get("mean_batch_size"),
            "padding_waste": self.scheduler.get("padding_waste"),
            "bound": self.scheduler.get("bound"),
            "wer": None if self.wer is None else round(self.wer, 4),
            "cpu_cores": self.scheduler.get("cpu_cores", {}),
        }


def load_audio(
    folder: Path | None, refs_path: Path | None, max_seconds: float | None = None
) -> list[AudioFile]:
    """Files of a folder with their references (those of 2 s to ``max_seconds`` if given),
    or the synthetic corpus (2–30 s unless ``max_seconds`` says less)."""
    if folder is None:
        max_seconds = min(max_seconds or 30.0, 30.0)
        root = Path(".corpus") / "bench"
        build_corpus(root, n_clips=24, long_clip_seconds=0.0)
        folder, refs_path = root, root / "refs.json"
    refs = load_refs(refs_path) if refs_path else {}
    files = []
    for path in sorted(p for p in folder.iterdir() if p.suffix.lower() in AUDIO_SUFFIXES):
        duration = decode(path, 4 * 3600).shape[0] / 16_000
        if max_seconds is None or 2.0 <= duration <= max_seconds:
            files.append(AudioFile(path, duration, refs.get(path.name), path.read_bytes()))
    if not files:
        raise SystemExit(f"no audio files in {folder}")
    return files


def scheduler_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    batches = after["batches"] - before["batches"]
    items = after["items"] - before["items"]
    frames = after["total_frames"] - before["total_frames"]
    padded = after["padded_frames"] - before["padded_frames"]
    return {
        "mean_batch_size": round(items / batches, 2) if batches else None,
        "padding_waste": round(padded / frames, 4) if frames else None,
        # which stage limited the server, from its capacities measured so far (None: not known)
        "bound": after.get("bound"),
    }


def policy_env(spec: str) -> dict[str, str]:
    """A server's environment for ``policy`` or ``policy@RxT`` (that policy on R CPU
    replicas of T threads each: ``none@2x1``), so one run can hold several layouts."""
    name, _, layout = spec.partition("@")
    env = {"ASRSERVE_BATCH_POLICY": name}
    if layout:
        replicas, _, threads = layout.partition("x")
        if not (replicas.isdigit() and threads.isdigit()):
            raise SystemExit(f"asrserve bench: {spec!r}: a layout is REPLICASxTHREADS, e.g. 2x1")
        env.update({"ASRSERVE_CPU_REPLICAS": replicas, "ASRSERVE_CPU_THREADS": threads})
    return env


def measure_policy(
    policy: str,
    config: BenchConfig,
    files: list[AudioFile],
    fields: dict[str, str],
    window: str | None = None,
    engine: str | None = None,
) -> list[Row]:
    rows = []
    label = policy if window is None else f"{policy}/{window}"
    with tempfile.TemporaryDirectory(prefix="asrserve-bench-") as tmp:
        server = None
        url = config.url
        if url is None:
            env = {**config.server_env, **policy_env(policy)}
            if engine is not None:
                env["ASRSERVE_ENGINE"] = engine
            if window is not None:
                env["ASRSERVE_ENCODER_WINDOW"] = window
            server = ServerProcess(Path(tmp) / "data", env=env).start(timeout=120)
            url = server.url
        try:
            asyncio.run(run_load(url, files[:2], Pattern(requests=2), fields))  # warm-up
            for pattern in config.patterns:
                before = httpx.get(f"{url}/v1/scheduler").json()
                client = time.process_time()
                result = asyncio.run(run_load(url, files, pattern, fields))
                client = time.process_time() - client
                after = httpx.get(f"{url}/v1/scheduler").json()
                delta = scheduler_delta(before, after)
                delta["cpu_cores"] = split(before, after, result.wall, client)
                rows.append(Row(label, pattern.describe(), result, delta, _wer(result), engine))
        finally:
            if server is not None:
                server.stop()
    return rows


def _wer(result: LoadResult) -> float | None:
    pairs = [(s.file.reference, s.text) for s in result.ok if s.file.reference is not None]
    if not pairs:
        return None
    return wer([ref for ref, _ in pairs if ref is not None], [hyp for _, hyp in pairs])


BASELINES = ("none", "unbatched")


def report(rows: list[Row], ceiling: Ceiling | None, baselines: Sequence[str] = BASELINES) -> str:
    """The rows as a table, with a "× B" column for each baseline B that ran: ``none`` is
    what a user would otherwise run, ``unbatched`` what batching itself adds."""
    ran = [b for b in baselines if any(row.policy == b for row in rows)]
    lines = [
        "| policy | load | req | err | audio s / wall s | req/s | p50 s | p95 s | p99 s "
        "| mean batch | padding | WER | " + "".join(f"× {b} | " for b in ran) + "bound |",
        "|" + "---|" * (13 + len(ran)),
    ]
    for row in rows:
        d = row.as_dict()
        ratios = "".join(f"{_ratio(row, rows, b)} | " for b in ran)
        lines.append(
            f"| {row.label} | {row.pattern} | {d['requests']} | {d['errors']} "
            f"| {d['audio_s_per_wall_s']:.2f} | {d['requests_per_s']:.2f} | {d['p50_s']:.2f} "
            f"| {d['p95_s']:.2f} | {d['p99_s']:.2f} | {d['mean_batch_size']} "
            f"| {d['padding_waste']} | {d['wer']} | {ratios}{d['bound'] or '–'} |"
        )
    if ceiling is not None:
        best = ceiling.best
        lines.append("")
        lines.append(
            f"ceiling (engine only, no server: {best.describe()}): "
            f"{best.audio_per_wall:.2f} audio s / wall s"
        )
        for row in rows:
            share = row.result.audio_per_wall / best.audio_per_wall
            lines.append(f"  {row.label}, {row.pattern}: {share:.2f}× the ceiling")
    cores = [(f"{r.label}, {r.pattern}", r.scheduler.get("cpu_cores", {})) for r in rows]
    table = split_table(cores)
    return "\n".join([*lines, "", table] if table else lines)


def _ratio(row: Row, rows: list[Row], baseline: str) -> str:
    """``row``'s throughput over the baseline's under the same load pattern (and engine)."""
    ref = next(
        (r for r in rows if (r.policy, r.pattern, r.engine) == (baseline, row.pattern, row.engine)),
        None,
    )
    if ref is None or not ref.result.audio_per_wall:
        return "–"
    return f"{row.result.audio_per_wall / ref.result.audio_per_wall:.2f}×"


def run_meta(
    files: Sequence[AudioFile], env: Mapping[str, str], url: str | None = None
) -> dict[str, Any]:
    """A report's ``meta``: the audio, the machine, and the settings of the servers the
    bench starts with ``env`` (with ``url``, the rows ran on that server, on its own)."""
    meta: dict[str, Any] = {
        "files": len(files),
        "audio_s": round(sum(f.duration for f in files), 2),
        "machine": platform.platform(),
        "cores": usable_cores(),
        "settings": server_settings(env),
    }
    if url is not None:
        meta["url"] = url
    return meta


def server_settings(env: Mapping[str, str]) -> dict[str, str]:
    """Each of :data:`REPORTED_SETTINGS` as a server reads it from this process's
    environment and ``env`` over it, written as its ``ASRSERVE_*`` variable would be."""
    fields: dict[str, Any] = {name.removeprefix(ENV_PREFIX).lower(): v for name, v in env.items()}
    settings = Settings(**fields)
    values = {name: getattr(settings, name) for name in REPORTED_SETTINGS}
    return {f"{ENV_PREFIX}{k.upper()}": _as_env(v) for k, v in values.items() if v is not None}


def _as_env(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(map(_as_env, value))
    if isinstance(value, float):
        return repr(value).removesuffix(".0")  # 200.0 as 200, 0.1 as 0.1
    return str(value)


def write_json(
    path: Path,
    rows: list[Row],
    ceiling: Ceiling | None,
    meta: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> None:
    body = {
        "meta": meta,
        "runs": [row.as_dict() for row in rows],
        "ceiling": None if ceiling is None else ceiling.as_dict(),
    }
    body.update(extra or {})
    path.write_text(json.dumps(body, indent=2), encoding="utf-8")
