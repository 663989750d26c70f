"""``asrserve bench --rate auto``: each policy's latency–throughput curve.

A closed loop measures capacity but hides queueing, and one open-loop rate is one point. The
curve first measures each policy's own capacity (a closed loop of :data:`CAPACITY_CLIENTS`
clients), then offers Poisson arrivals at shares of it and records latency and what was
served. Its summary is the highest arrival rate a policy *sustains* (:meth:`Point.sustained`):
the figure the issue compares between policies (greedy ≥ 1.5× none at p95 ≤ 5 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrserve.bench.load import AudioFile, LoadResult, Pattern, arrival_gaps, run_load
from asrserve.bench.runner import policy_env, run_meta
from asrserve.cli.server_process import ServerProcess

CAPACITY_CLIENTS = 16
P95_BUDGET_S = 5.0
ACHIEVED_SHARE = 0.95  # of the offered rate, to count as sustained
MIN_REQUESTS = 20  # per point: fewer make p95 the second-slowest request
FIELDS = {"model": "whisper-1", "response_format": "json"}
RULE = f"achieved ≥ {ACHIEVED_SHARE} × offered, no errors, p95 ≤ {P95_BUDGET_S:g} s"


@dataclass(frozen=True)
class Point:
    """One open-loop run: what was offered, what was served, and how long it took."""

    policy: str
    percent: float  # of the policy's capacity
    offered_rps: float
    offered_audio: float  # audio s offered per s
    requests: int
    errors: int
    achieved_rps: float
    achieved_audio: float
    p50_s: float
    p95_s: float
    p99_s: float

    @property
    def sustained(self) -> bool:
        """Served about as fast as offered, without errors, within the p95 budget."""
        return (
            self.errors == 0
            and self.achieved_rps >= ACHIEVED_SHARE * self.offered_rps
            and self.p95_s <= P95_BUDGET_S  # NaN (nothing answered) is not
        )

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"policy": self.policy, "percent": self.percent}
        for name in ("offered_rps", "offered_audio", "achieved_rps", "achieved_audio"):
            body[name] = _number(getattr(self, name))
        body.update(requests=self.requests, errors=self.errors)
        body.update(p50_s=_number(self.p50_s), p95_s=_number(self.p95_s))
        body.update(p99_s=_number(self.p99_s), sustained=self.sustained)
        return body


@dataclass(frozen=True)
class Curve:
    policy: str
    capacity_rps: float
    capacity_audio: float
    points: tuple[Point, ...]

    @property
    def sustained_rps(self) -> float | None:
        """The highest offered rate among the sustained points (None: no point was)."""
        return max((p.offered_rps for p in self.points if p.sustained), default=None)


def parse_points(text: str) -> list[float]:
    """``--curve-points``: percentages of capacity, e.g. ``25,50,100``."""
    percents = [float(part) for part in text.split(",") if part.strip()]
    if not percents or any(not p > 0 for p in percents):
        raise SystemExit(f"asrserve bench: --curve-points wants percentages above 0: {text!r}")
    return percents


def point_rates(capacity_rps: float, percents: Sequence[float]) -> list[float]:
    """The arrival rate (req/s) of each point, a percentage of the capacity."""
    return [capacity_rps * percent / 100 for percent in percents]


def poisson_pattern(rate: float, requests: int) -> Pattern:
    """Poisson arrivals whose seeded draw offers ``rate`` on the whole: the exponential gaps
    are scaled so that their mean is ``1 / rate``. Unscaled, 20 requests' gaps are easily a
    fifth off their mean, which would shift every point and fail the achieved ≥ 0.95 ×
    offered test by chance; scaled, the offered rate in the table is what was offered."""
    probe = Pattern(requests=requests, rate=rate)
    gaps = arrival_gaps(probe)
    if not gaps:
        return probe
    drawn = len(gaps) / sum(gaps)
    return Pattern(requests=requests, rate=rate * rate / drawn)


def make_point(
    policy: str, percent: float, offered_rps: float, result: LoadResult, order: list[AudioFile]
) -> Point:
    mean_clip = sum(f.duration for f in order) / len(order)
    return Point(
        policy=policy,
        percent=percent,
        offered_rps=offered_rps,
        offered_audio=offered_rps * mean_clip,
        requests=len(result.samples),
        errors=len(result.samples) - len(result.ok),
        achieved_rps=result.requests_per_s,
        achieved_audio=result.audio_per_wall,
        p50_s=result.percentile(50),
        p95_s=result.percentile(95),
        p99_s=result.percentile(99),
    )


@dataclass(frozen=True)
class CurveConfig:
    percents: Sequence[float]
    requests: int  # per open-loop point
    capacity_requests: int  # the closed loop's
    server_env: dict[str, str]


def measure_curve(policy: str, files: list[AudioFile], config: CurveConfig) -> Curve:
    """Capacity, then each point, on a fresh server of the policy (``policy@RxT``: on that
    CPU layout; the server is stopped at the end)."""
    env = {**config.server_env, **policy_env(policy)}
    with tempfile.TemporaryDirectory(prefix="asrserve-curve-") as tmp:
        server = ServerProcess(Path(tmp) / "data", env=env).start(timeout=120)
        try:
            asyncio.run(run_load(server.url, files[:2], Pattern(requests=2), FIELDS))  # warm-up
            closed = Pattern(requests=config.capacity_requests, concurrency=CAPACITY_CLIENTS)
            capacity = asyncio.run(run_load(server.url, files, closed, FIELDS))
            if not capacity.ok:
                raise SystemExit(f"asrserve bench: {policy} answered no request of the closed loop")
            print(f"  {policy}: capacity {capacity.requests_per_s:.3f} req/s", flush=True)
            order = [files[i % len(files)] for i in range(config.requests)]
            points = []
            rates = point_rates(capacity.requests_per_s, config.percents)
            for percent, rate in zip(config.percents, rates, strict=True):
                pattern = poisson_pattern(rate, config.requests)
                result = asyncio.run(run_load(server.url, files, pattern, FIELDS))
                points.append(make_point(policy, percent, rate, result, order))
                print(f"  {policy}: {percent:g}% ({rate:.3f} req/s) done", flush=True)
        finally:
            server.stop()
    return Curve(policy, capacity.requests_per_s, capacity.audio_per_wall, tuple(points))


def ratio(curves: Sequence[Curve], top: str = "greedy", bottom: str = "none") -> float | None:
    """``top``'s sustained rate over ``bottom``'s, when both curves have one."""
    rates = {curve.policy: curve.sustained_rps for curve in curves}
    high, low = rates.get(top), rates.get(bottom)
    return None if high is None or not low else high / low


def curve_report(curves: Sequence[Curve]) -> str:
    lines = [
        "| policy | % of capacity | offered req/s | offered audio s/s | achieved req/s "
        "| achieved audio s/s | p50 s | p95 s | p99 s | errors | sustained |",
        "|" + "---|" * 11,
    ]
    for point in (p for curve in curves for p in curve.points):
        lines.append(
            f"| {point.policy} | {point.percent:g} | {point.offered_rps:.3f} "
            f"| {point.offered_audio:.2f} | {point.achieved_rps:.3f} "
            f"| {point.achieved_audio:.2f} | {_seconds(point.p50_s)} | {_seconds(point.p95_s)} "
            f"| {_seconds(point.p99_s)} | {point.errors} | {'yes' if point.sustained else 'no'} |"
        )
    lines.append("")
    lines.append(f"capacity (closed loop, {CAPACITY_CLIENTS} clients):")
    for curve in curves:
        lines.append(
            f"  {curve.policy}: {curve.capacity_rps:.3f} req/s, "
            f"{curve.capacity_audio:.2f} audio s/s"
        )
    lines.append(f"highest offered rate sustained ({RULE}):")
    for curve in curves:
        best = curve.sustained_rps
        said = "no point sustained" if best is None else f"{best:.3f} req/s"
        lines.append(f"  {curve.policy}: {said}")
    share = ratio(curves)
    if share is not None:
        lines.append(f"greedy / none: {share:.2f}× (issue target: ≥ 1.5×)")
    return "\n".join(lines)


def curve_body(curves: Sequence[Curve]) -> dict[str, Any]:
    """The curve for ``--json``."""
    return {
        "rule": RULE,
        "capacity_clients": CAPACITY_CLIENTS,
        "policies": [
            {
                "policy": curve.policy,
                "capacity_rps": _number(curve.capacity_rps),
                "capacity_audio": _number(curve.capacity_audio),
                "sustained_rps": curve.sustained_rps,
                "points": [point.as_dict() for point in curve.points],
            }
            for curve in curves
        ],
        "greedy_over_none": ratio(curves),
    }


def _number(value: float) -> float | None:
    """Rounded for JSON, which has no NaN."""
    return None if math.isnan(value) else round(value, 3)


def _seconds(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.2f}"


def run_curve(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int:
    """``asrserve bench --rate auto``: measure, print the table, write the SVG and JSON."""
    if args.url is not None:
        raise SystemExit("asrserve bench: --rate auto starts a fresh server per policy")
    config = CurveConfig(
        percents=parse_points(args.curve_points),
        requests=max(args.requests or 3 * len(files), MIN_REQUESTS),
        capacity_requests=args.requests or len(files),
        server_env=env,
    )
    audio = sum(f.duration for f in files)
    print(
        f"{len(files)} files, {audio:.1f} s of audio; {config.requests} requests per point "
        f"at {', '.join(f'{p:g}' for p in config.percents)}% of capacity",
        flush=True,
    )
    curves = [measure_curve(policy, files, config) for policy in args.policies.split(",")]
    print(curve_report(curves))
    if args.curve_svg is not None:
        from asrserve.bench.curve_svg import curve_svg

        args.curve_svg.parent.mkdir(parents=True, exist_ok=True)
        args.curve_svg.write_text(curve_svg(curves), encoding="utf-8")
    if args.json is not None:
        body = {"meta": run_meta(files, env), "curve": curve_body(curves)}
        args.json.write_text(json.dumps(body, indent=2), encoding="utf-8")
    return 0
