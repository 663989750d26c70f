"""``asrserve tune``: fit the latency model on a recording, simulate a grid, recommend."""

from __future__ import annotations

import argparse
import math
import random
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from asrserve.batcher.policies import POLICIES, policy_class
from asrserve.batcher.recording import ARRIVALS, BATCHES, read_rows, recordings_dir
from asrserve.cli.tools import Command
from asrserve.settings import Settings
from asrserve.tune.model import MIN_ROWS, curves, describe_curves, fit
from asrserve.tune.plot import write_plot
from asrserve.tune.simulator import Outcome, Request, Setting, SimulatedService, simulate

TIE = 0.01  # throughputs within 1% count as equal; the lower p99 wins


def add_arguments(tune: argparse.ArgumentParser) -> None:
    tune.add_argument("--data-dir", type=Path, help="the server's data dir (ASRSERVE_DATA_DIR)")
    tune.add_argument("--rate", type=float, help="synthetic Poisson arrivals per second")
    tune.add_argument("--burst", type=int, default=1, help="synthetic: arrivals per burst")
    tune.add_argument("--requests", type=int, help="requests to simulate (synthetic: 1000)")
    tune.add_argument("--durations", help="synthetic clip lengths (s), cycled: 3.5,12,28")
    tune.add_argument("--policies", default="greedy,window", help=",".join(POLICIES))
    tune.add_argument("--max-wait-ms", default="0,10,20,50,100", help="window policy waits")
    tune.add_argument("--max-batch-size", default="4,8,16,32", help="batch size limits")
    tune.add_argument("--devices", type=int, default=1, help="model replicas (devices)")
    tune.add_argument("--p99-target-ms", type=float, help="recommend only settings under this")
    tune.add_argument("--overhead-ms", type=float, help="per-request overhead (default: fitted)")
    tune.add_argument("--seed", type=int, default=0)
    tune.add_argument("--plot", type=Path, help="write p99 vs throughput as HTML (inline SVG)")


def run(args: argparse.Namespace) -> int:
    settings = Settings()  # encoder windows and aging as the server has them (ASRSERVE_*)
    folder = recordings_dir(args.data_dir or settings.data_dir)
    arrivals = read_rows(folder / ARRIVALS)
    batches = [row for row in read_rows(folder / BATCHES) if row.get("size", 0) > 0]
    try:
        if len(batches) < MIN_ROWS:
            raise ValueError(f"need at least {MIN_ROWS} recorded batches in {folder}")
        model = fit(batches, arrivals)
        if args.overhead_ms is not None:
            model = replace(model, overhead=args.overhead_ms / 1000, overhead_per_s=0.0)
        requests = _requests(args, arrivals)
        grid = _grid(args)
    except ValueError as exc:
        print(f"asrserve tune: {exc}", file=sys.stderr)
        return 2
    print(f"model: {model.describe()}")
    for line in describe_curves(curves(batches, settings.max_batch_size)):
        print(line)
    print(f"load: {_describe(args, requests)}")
    service = SimulatedService.of(settings, args.devices, settings.windows)
    outcomes = [simulate(requests, setting, model, service) for setting in grid]
    best = recommend(outcomes, args.p99_target_ms)
    print(table(outcomes))
    print(_recommendation(best, outcomes, args.p99_target_ms))
    if args.plot is not None:
        write_plot(args.plot, outcomes, args.p99_target_ms, best)
        print(f"plot: {args.plot}")
    return 0


def _requests(args: argparse.Namespace, arrivals: list[dict[str, Any]]) -> list[Request]:
    if args.rate is None:  # replay: inter-arrival times as recorded
        if not arrivals:
            raise ValueError("no recorded arrivals to replay; give --rate")
        rows = sorted(arrivals, key=lambda row: float(row["t"]))  # wall clock: survives reboots
        rows = rows[: args.requests] if args.requests else rows
        start = float(rows[0]["t"])
        return [
            Request(float(r["t"]) - start, float(r["duration"]), int(r.get("priority", 0)))
            for r in rows
        ]
    if args.rate <= 0 or args.burst < 1:
        raise ValueError("--rate must be positive and --burst at least 1")
    rng = random.Random(args.seed)
    count = args.requests or 1000
    if args.durations:
        pool = [float(part) for part in args.durations.split(",") if part.strip()]
        if not pool or min(pool) <= 0:
            raise ValueError("--durations needs positive lengths in seconds")
        lengths = [pool[i % len(pool)] for i in range(count)]
    else:
        recorded = [float(row["duration"]) for row in arrivals if row.get("duration")]
        if not recorded:
            raise ValueError("no recorded arrivals to take durations from; give --durations")
        lengths = [rng.choice(recorded) for _ in range(count)]
    gaps = random.Random(args.seed)  # as the bench: bursts arrive as a Poisson process
    now, requests = 0.0, []
    for index, length in enumerate(lengths):
        if index % args.burst == 0 and index:
            now += gaps.expovariate(args.rate / args.burst)
        requests.append(Request(now, length))
    return requests


def _describe(args: argparse.Namespace, requests: list[Request]) -> str:
    audio = sum(r.duration for r in requests)
    kind = "replay of the recording" if args.rate is None else f"Poisson {args.rate:g} req/s"
    if args.rate is not None and args.burst > 1:
        kind += f" in bursts of {args.burst}"
    return f"{kind}, {len(requests)} requests, {audio:.1f} s of audio, {args.devices} device(s)"


def _grid(args: argparse.Namespace) -> list[Setting]:
    sizes = [int(part) for part in args.max_batch_size.split(",") if part.strip()]
    waits = [float(part) for part in args.max_wait_ms.split(",") if part.strip()]
    policies = [part.strip() for part in args.policies.split(",") if part.strip()]
    if args.devices < 1 or any(size < 1 for size in sizes) or any(w < 0 for w in waits):
        raise ValueError("--devices and --max-batch-size must be ≥ 1, --max-wait-ms ≥ 0")
    grid: list[Setting] = []
    for policy in policies:
        kind = policy_class(policy)  # ValueError naming the registered ones
        if kind.whole_files:
            grid.append(Setting(policy, 1, 0.0))
            continue
        for size in sizes:
            for wait in waits if kind.uses_max_wait else [0.0]:
                grid.append(Setting(policy, size, wait))
    if not grid:
        raise ValueError("no setting to simulate")
    return grid


def recommend(outcomes: list[Outcome], p99_target_ms: float | None) -> Outcome | None:
    """The highest throughput whose p99 meets the target (ties: the lower p99)."""
    target = math.inf if p99_target_ms is None else p99_target_ms / 1000
    fitting = [o for o in outcomes if o.percentile(99) <= target]
    if not fitting:
        return None
    top = max(o.throughput for o in fitting)
    return min(
        (o for o in fitting if o.throughput >= top * (1 - TIE)), key=lambda o: o.percentile(99)
    )


def table(outcomes: list[Outcome]) -> str:
    lines = [
        "| setting | audio s / wall s | p50 s | p99 s | mean batch |",
        "|---|---|---|---|---|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.setting.label()} | {o.throughput:.2f} | {o.percentile(50):.2f} "
            f"| {o.percentile(99):.2f} | {o.mean_batch:.2f} |"
        )
    return "\n".join(lines)


def _recommendation(
    best: Outcome | None, outcomes: list[Outcome], p99_target_ms: float | None
) -> str:
    goal = "" if p99_target_ms is None else f" with p99 ≤ {p99_target_ms:g} ms"
    if best is None:
        lowest = min(outcomes, key=lambda o: o.percentile(99))
        return (
            f"recommendation: no setting meets p99 ≤ {p99_target_ms:g} ms; the lowest p99 is "
            f"{lowest.percentile(99):.2f} s ({lowest.setting.label()})"
        )
    return (
        f"recommendation: {best.setting.label()}{goal}: {best.throughput:.2f} audio s / wall s, "
        f"p50 {best.percentile(50):.2f} s, p99 {best.percentile(99):.2f} s"
    )


COMMAND = Command(
    help="simulate scheduler settings on recorded traffic", add_arguments=add_arguments, run=run
)
"""``asrserve tune``, registered as an ``asrserve.commands`` entry point (cli/tools.py)."""
