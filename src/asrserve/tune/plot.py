"""p99 latency against throughput, one numbered point per setting, with the settings in a
table under it: one HTML file, inline SVG, no external assets."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from asrserve.tune.simulator import Outcome

WIDTH, HEIGHT, MARGIN, RIGHT = 900, 480, 64, 240
_Scale = Callable[[float], float]


def write_plot(
    path: Path, outcomes: Sequence[Outcome], p99_target_ms: float | None, best: Outcome | None
) -> None:
    path.write_text(render(outcomes, p99_target_ms, best), encoding="utf-8")


def render(outcomes: Sequence[Outcome], p99_target_ms: float | None, best: Outcome | None) -> str:
    title = "asrserve tune: p99 latency vs throughput"
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>'
        "<style>body{font-family:sans-serif} td,th{padding:2px 10px;text-align:right}"
        " td:nth-child(2),th:nth-child(2){text-align:left}"
        " .best{color:#27ae60;font-weight:bold}</style>"
        f"</head><body><h1>{title}</h1>\n{_svg(outcomes, p99_target_ms, best)}\n"
        f"{_table(outcomes, best)}</body></html>\n"
    )


def _svg(outcomes: Sequence[Outcome], p99_target_ms: float | None, best: Outcome | None) -> str:
    points = [
        (number, o.throughput, o.percentile(99), o)
        for number, o in enumerate(outcomes, 1)
        if math.isfinite(o.throughput) and math.isfinite(o.percentile(99))
    ]
    target = None if p99_target_ms is None else p99_target_ms / 1000
    xs = [x for _, x, _, _ in points] or [0.0, 1.0]
    ys = [y for _, _, y, _ in points] + ([target] if target is not None else []) or [1.0]
    x_lo, x_hi = _span(min(xs), max(xs))
    y_hi = max(max(ys) * 1.1, 1e-3)

    def sx(x: float) -> float:
        return MARGIN + (x - x_lo) / (x_hi - x_lo) * (WIDTH - MARGIN - RIGHT)

    def sy(y: float) -> float:
        return HEIGHT - MARGIN - y / y_hi * (HEIGHT - 2 * MARGIN)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        _axes(x_lo, x_hi, y_hi, sx, sy),
    ]
    if target is not None:
        y = sy(target)
        parts.append(
            f'<line x1="{MARGIN}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
            'stroke="#c0392b" stroke-dasharray="6 4"/>'
            f'<text x="{WIDTH - RIGHT}" y="{y - 4:.1f}" text-anchor="end" fill="#c0392b">'
            f"p99 target {target:g} s</text>"
        )
    spots: dict[tuple[int, int], list[tuple[int, Outcome]]] = {}  # coinciding points
    for number, x, y, o in points:
        spots.setdefault((round(sx(x) / 12), round(sy(y) / 12)), []).append((number, o))
    for group in spots.values():
        px, py = round(sx(group[0][1].throughput)), round(sy(group[0][1].percentile(99)))
        chosen = any(o is best for _, o in group)
        colour = "#27ae60" if chosen else "#2c3e50"
        names = "; ".join(html.escape(o.setting.label()) for _, o in group)
        if len(group) == 1:
            label = f"{group[0][0]}: {names}"
        else:
            label = "#" + ", ".join(str(number) for number, _ in group)
        parts.append(
            f'<circle cx="{px}" cy="{py}" r="{6 if chosen else 4}" fill="{colour}">'
            f"<title>{names}</title></circle>"
            f'<text x="{px + 8}" y="{py - 5}" fill="{colour}">{label}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _table(outcomes: Sequence[Outcome], best: Outcome | None) -> str:
    rows = [
        "<table><tr><th>#</th><th>setting</th><th>audio s / wall s</th><th>p50 s</th>"
        "<th>p99 s</th><th>mean batch</th></tr>"
    ]
    for number, o in enumerate(outcomes, 1):
        mark = ' class="best"' if o is best else ""
        note = " (recommended)" if o is best else ""
        rows.append(
            f"<tr{mark}><td>{number}</td><td>{html.escape(o.setting.label())}{note}</td>"
            f"<td>{o.throughput:.2f}</td><td>{o.percentile(50):.2f}</td>"
            f"<td>{o.percentile(99):.2f}</td><td>{o.mean_batch:.2f}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


def _span(lo: float, hi: float) -> tuple[float, float]:
    pad = max((hi - lo) * 0.1, abs(hi) * 0.05, 1e-3)
    return lo - pad, hi + pad


def _axes(x_lo: float, x_hi: float, y_hi: float, sx: _Scale, sy: _Scale) -> str:
    bottom, right = HEIGHT - MARGIN, WIDTH - RIGHT
    out = [
        f'<line x1="{MARGIN}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>',
        f'<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{bottom}" stroke="black"/>',
        f'<text x="{(MARGIN + right) / 2}" y="{HEIGHT - 16}" text-anchor="middle">'
        "throughput (audio s / wall s)</text>",
        f'<text x="16" y="{HEIGHT / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {HEIGHT / 2})">p99 latency (s)</text>',
    ]
    for i in range(6):
        x = x_lo + (x_hi - x_lo) * i / 5
        y = y_hi * i / 5
        out.append(
            f'<text x="{sx(x):.1f}" y="{bottom + 16}" text-anchor="middle">{x:.1f}</text>'
            f'<text x="{MARGIN - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.2f}</text>'
        )
    return "".join(out)
