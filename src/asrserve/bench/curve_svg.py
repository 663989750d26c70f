"""The latency–throughput curve as an SVG picture, written by hand (no plotting dependency).

Two panels over the same x axis (offered req/s): on the left, p50/p95/p99 latency with the
p95 budget drawn across; on the right, achieved against offered with the diagonal a server
keeping up would follow. One colour per policy; the percentiles differ by dash pattern. Each
line is one ``<polyline>`` tagged ``data-policy`` and ``data-series``, so a test (or a
reader of the file) can find them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

from asrserve.bench.curve import P95_BUDGET_S, Curve, Point

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
LATENCY_SERIES = (("p50", "p50_s", ""), ("p95", "p95_s", "7 4"), ("p99", "p99_s", "2 3"))
WIDTH, HEIGHT = 980, 440
PLOT_W, PLOT_H = 360, 280
TOP = 50


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Ticks from 0 at a 1, 2, 2.5 or 5 × 10^k step; the last is at or above ``top``."""
    top = top if top > 0 else 1.0
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


@dataclass(frozen=True)
class Panel:
    """A plot area at (``left``, TOP) mapping 0..x_top × 0..y_top onto it."""

    left: float
    x_top: float
    y_top: float

    def x(self, value: float) -> float:
        return self.left + PLOT_W * value / self.x_top

    def y(self, value: float) -> float:
        return TOP + PLOT_H * (1 - value / self.y_top)

    def axes(self, title: str, x_label: str, y_label: str, y_ticks: list[float]) -> list[str]:
        bottom, out = TOP + PLOT_H, []
        out.append(_text(self.left + PLOT_W / 2, TOP - 16, title, 'font-weight="bold"'))
        out.append(_line(self.left, TOP, self.left, bottom))
        out.append(_line(self.left, bottom, self.left + PLOT_W, bottom))
        for tick in nice_ticks(self.x_top):
            out.append(_line(self.x(tick), bottom, self.x(tick), bottom + 5))
            out.append(_text(self.x(tick), bottom + 18, f"{tick:g}"))
        for tick in y_ticks:
            out.append(_line(self.left - 5, self.y(tick), self.left, self.y(tick)))
            out.append(_text(self.left - 8, self.y(tick) + 4, f"{tick:g}", 'text-anchor="end"'))
        out.append(_text(self.left + PLOT_W / 2, bottom + 38, x_label))
        middle = TOP + PLOT_H / 2
        rotate = f'transform="rotate(-90 {self.left - 45:.1f} {middle:.1f})"'
        out.append(_text(self.left - 45, middle, y_label, rotate))
        return out

    def polyline(self, points: list[tuple[float, float]], colour: str, tags: str) -> str:
        kept = " ".join(f"{self.x(x):.1f},{self.y(y):.1f}" for x, y in points if not math.isnan(y))
        return f'<polyline points="{kept}" fill="none" stroke="{colour}" stroke-width="2" {tags}/>'


def curve_svg(curves: Sequence[Curve]) -> str:
    """The SVG document of ``curves`` (one colour per policy, in order)."""
    points = [p for curve in curves for p in curve.points]
    x_top = nice_ticks(max((p.offered_rps for p in points), default=1.0))[-1]
    latencies = [getattr(p, field) for p in points for _, field, _ in LATENCY_SERIES]
    finite = [v for v in latencies if not math.isnan(v)]
    latency_ticks = nice_ticks(max([P95_BUDGET_S * 1.1, *finite]))
    rate_top = max([x_top, *(p.achieved_rps for p in points)])
    rate_ticks = nice_ticks(rate_top)
    left = Panel(90, x_top, latency_ticks[-1])
    right = Panel(90 + PLOT_W + 120, rate_ticks[-1], rate_ticks[-1])
    body = left.axes("Latency vs offered rate", "offered req/s", "latency s", latency_ticks)
    body += right.axes("Achieved vs offered rate", "offered req/s", "achieved req/s", rate_ticks)
    budget = left.y(P95_BUDGET_S)
    body.append(_line(left.left, budget, left.left + PLOT_W, budget, 'stroke-dasharray="3 3"'))
    label = f"p95 budget {P95_BUDGET_S:g} s"
    body.append(_text(left.left + 4, budget - 5, label, 'text-anchor="start"'))
    diagonal = right.x(right.x_top)
    body.append(_line(right.left, right.y(0), diagonal, right.y(right.x_top), 'stroke="#999"'))
    for index, curve in enumerate(curves):
        colour = COLOURS[index % len(COLOURS)]
        body += _curve_lines(left, right, curve, colour)
    body += _legend(curves)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">\n'
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n"
    )


def _curve_lines(left: Panel, right: Panel, curve: Curve, colour: str) -> list[str]:
    ordered: list[Point] = sorted(curve.points, key=lambda p: p.offered_rps)
    policy = quoteattr(curve.policy)
    out = []
    for series, field, dashes in LATENCY_SERIES:
        line = [(p.offered_rps, float(getattr(p, field))) for p in ordered]
        dash = f' stroke-dasharray="{dashes}"' if dashes else ""
        tags = f'data-policy={policy} data-series="{series}"{dash}'
        out.append(left.polyline(line, colour, tags))
    achieved = [(p.offered_rps, p.achieved_rps) for p in ordered]
    out.append(right.polyline(achieved, colour, f'data-policy={policy} data-series="achieved"'))
    for p in ordered:
        out.append(
            f'<circle cx="{right.x(p.offered_rps):.1f}" cy="{right.y(p.achieved_rps):.1f}" '
            f'r="3" fill="{colour}"/>'
        )
    return out


def _legend(curves: Sequence[Curve]) -> list[str]:
    out, y = [], TOP + PLOT_H + 70
    x = 90
    for index, curve in enumerate(curves):
        colour = COLOURS[index % len(COLOURS)]
        out.append(_line(x, y - 4, x + 24, y - 4, f'stroke="{colour}" stroke-width="2"'))
        out.append(_text(x + 30, y, curve.policy, 'text-anchor="start"'))
        x += 40 + 8 * len(curve.policy)
    for series, _, dashes in LATENCY_SERIES:
        dash = f' stroke-dasharray="{dashes}"' if dashes else ""
        out.append(_line(x, y - 4, x + 24, y - 4, f'stroke-width="2"{dash}'))
        out.append(_text(x + 30, y, f"{series} latency", 'text-anchor="start"'))
        x += 110
    return out


def _line(x1: float, y1: float, x2: float, y2: float, extra: str = "") -> str:
    stroke = "" if 'stroke="' in extra else 'stroke="black" '
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" {stroke}{extra}/>'


def _text(x: float, y: float, text: str, extra: str = "") -> str:
    anchor = "" if "text-anchor" in extra else 'text-anchor="middle" '
    content = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f'<text x="{x:.1f}" y="{y:.1f}" {anchor}{extra}>{content}</text>'
