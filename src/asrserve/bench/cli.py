"""Arguments of ``asrserve bench`` and the run they describe."""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

from asrserve.bench.load import Pattern
from asrserve.bench.runner import (
    BenchConfig,
    load_audio,
    measure_policy,
    offline_limit,
    report,
    write_json,
)
from asrserve.settings import Settings

ENV_FLAGS = {
    "beam_size": "ASRSERVE_BEAM_SIZE",
    "max_batch_size": "ASRSERVE_MAX_BATCH_SIZE",
    "max_wait_ms": "ASRSERVE_MAX_WAIT_MS",
    "cpu_workers": "ASRSERVE_CPU_WORKERS",
    "cpu_threads": "ASRSERVE_CPU_THREADS",
    "device": "ASRSERVE_DEVICE",
    "compute_type": "ASRSERVE_COMPUTE_TYPE",
    "model": "ASRSERVE_MODEL",
}


def add_arguments(bench: argparse.ArgumentParser) -> None:
    bench.add_argument("--audio", type=Path, help="folder of audio (default: synthetic 2–30 s)")
    bench.add_argument("--refs", type=Path, help="refs.json {file: reference text} for WER")
    bench.add_argument("--url", help="an already running server (default: start one per policy)")
    bench.add_argument("--policies", default="greedy,window,none")
    bench.add_argument("--concurrency", default="16,1", help="closed-loop clients, e.g. 16,1")
    bench.add_argument("--rate", type=float, help="open loop instead: arrivals per second")
    bench.add_argument("--burst", type=int, default=1, help="open loop: arrivals per burst")
    bench.add_argument("--requests", type=int, help="requests per load pattern")
    bench.add_argument("--offline", action="store_true", help="also measure the engine alone")
    bench.add_argument("--encoder-windows", help="compare encoder window modes: adaptive,full")
    bench.add_argument(
        "--max-clip-seconds",
        type=float,
        help="only clips of 2 s up to this long (synthetic corpus: 30)",
    )
    bench.add_argument("--baseline", help="the row ratios are taken against (default: none)")
    bench.add_argument("--json", type=Path, help="write a machine-readable report here")
    bench.add_argument("--beam-size", type=int)
    bench.add_argument("--max-batch-size", type=int)
    bench.add_argument("--max-wait-ms", type=float)
    bench.add_argument("--cpu-workers", type=int)
    bench.add_argument("--cpu-threads", type=int)
    bench.add_argument("--device")
    bench.add_argument("--compute-type")
    bench.add_argument("--model", type=Path)


def run(args: argparse.Namespace) -> int:
    files = load_audio(args.audio, args.refs, args.max_clip_seconds)
    windows: list[str | None] = args.encoder_windows.split(",") if args.encoder_windows else [None]
    if args.rate is not None:
        patterns = [
            Pattern(
                requests=args.requests or 3 * len(files),
                rate=args.rate,
                burst=args.burst,
                concurrency=64,
            )
        ]
    else:
        patterns = [
            Pattern(requests=args.requests or max(len(files), 2 * c), concurrency=c)
            for c in (int(part) for part in args.concurrency.split(","))
        ]
    env = {
        name: str(getattr(args, attr))
        for attr, name in ENV_FLAGS.items()
        if getattr(args, attr) is not None
    }
    config = BenchConfig(
        policies=args.policies.split(","),
        patterns=patterns,
        server_env=env,
        url=args.url,
        offline=args.offline,
        windows=windows,
    )
    overrides = {k: getattr(args, k) for k in ENV_FLAGS if getattr(args, k) is not None}
    if windows[0] is not None:
        overrides["encoder_window"] = windows[0]  # the offline limit uses the first mode
    settings = Settings(**overrides)
    fields = {"model": "whisper-1", "response_format": "json"}
    audio = sum(f.duration for f in files)
    print(
        f"{len(files)} files, {audio:.1f} s of audio; beam {settings.beam_size}, "
        f"max batch {settings.max_batch_size}, max wait {settings.max_wait_ms} ms, "
        f"{settings.cpu_workers} CPU worker(s), {settings.encoder_window.value} encoder windows",
        flush=True,
    )
    rows = []
    for policy in config.policies:
        for window in windows:
            rows.extend(measure_policy(policy, config, files, fields, window))
            print(f"  {policy}{'' if window is None else '/' + window}: done", flush=True)
    offline = offline_limit(files, settings, settings.beam_size) if config.offline else None
    print(report(rows, offline, args.baseline or "none"))
    if args.json is not None:
        meta = {
            "files": len(files),
            "audio_s": round(audio, 2),
            "machine": platform.platform(),
            "settings": env,
        }
        write_json(args.json, rows, offline, meta)
    return 0
