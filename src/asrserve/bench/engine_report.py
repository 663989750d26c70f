"""The report of ``asrserve bench --engines``: the engines alone side by side (their batch
curves, each batch size over batch 1, each engine over the first), beside the served rows
(``bench/engines.py``), as tables and as the JSON's ``engines``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from asrserve.bench.ceiling import Ceiling, CeilingRow
from asrserve.bench.engine_curve import EngineCurves
from asrserve.bench.engines import served_body, served_table, side_by_side
from asrserve.bench.runner import Row


def find(ceiling: Ceiling, like: CeilingRow) -> CeilingRow | None:
    """``ceiling``'s row of ``like``'s layout, window mode and batch size."""
    key = (like.layout, like.windows, like.batch_size)
    return next((r for r in ceiling.rows if (r.layout, r.windows, r.batch_size) == key), None)


def over_batch_1(ceiling: Ceiling, row: CeilingRow) -> float | None:
    one = ceiling.unbatched(row)
    return None if one is None else row.audio_per_wall / one.audio_per_wall


def over_first(curves: EngineCurves, engine: str, like: CeilingRow) -> float | None:
    """``engine``'s throughput over the first engine's at ``like``'s point of the curve."""
    mine = find(curves.ceilings[engine], like)
    ref = find(curves.ceilings[curves.engines[0]], like)
    return None if mine is None or ref is None else mine.audio_per_wall / ref.audio_per_wall


def curve_body(curves: EngineCurves) -> list[dict[str, Any]]:
    """Each point of the curve (layout, windows, batch size): every engine's figures, and
    each other engine's throughput over the first's."""
    first = curves.engines[0]
    body = []
    for like in curves.ceilings[first].rows:
        entry: dict[str, Any] = {
            "layout": like.layout,
            "windows": like.windows,
            "batch_size": like.batch_size,
            "mean_batch": _round(curves.mean_batch.get((like.windows, like.batch_size))),
        }
        for engine in curves.engines:
            row = find(curves.ceilings[engine], like)
            entry[engine] = None if row is None else _point(curves.ceilings[engine], row)
        entry[f"over_{first}"] = {
            engine: _round(over_first(curves, engine, like)) for engine in curves.engines[1:]
        }
        body.append(entry)
    return body


def _point(ceiling: Ceiling, row: CeilingRow) -> dict[str, Any]:
    return {
        "audio_s_per_wall_s": round(row.audio_per_wall, 3),
        "min": round(row.low, 3),
        "max": round(row.high, 3),
        "x_batch_1": _round(over_batch_1(ceiling, row)),
        "peak_mib": round(row.peak_mib, 1),
    }


@dataclass(frozen=True)
class Gain:
    """What batching gains one engine alone on one layout and window mode."""

    engine: str
    ceiling: Ceiling  # the engine's
    largest: CeilingRow  # its largest batch size
    best: CeilingRow  # its fastest batch size

    def as_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "layout": self.largest.layout,
            "windows": self.largest.windows,
            "largest_batch": self.largest.batch_size,
            "largest_x_batch_1": _round(over_batch_1(self.ceiling, self.largest)),
            "best_batch": self.best.batch_size,
            "best_audio_s_per_wall_s": round(self.best.audio_per_wall, 3),
            "best_x_batch_1": _round(over_batch_1(self.ceiling, self.best)),
        }

    def describe(self) -> str:
        largest, best = self.largest, self.best
        return (
            f"{self.engine}, {largest.layout} {largest.windows}: batch {largest.batch_size} "
            f"÷ batch 1 = {_fixed(over_batch_1(self.ceiling, largest), '×')}; best batch "
            f"{best.batch_size} ({best.audio_per_wall:.2f} audio s / s, "
            f"{_fixed(over_batch_1(self.ceiling, best), '×')} batch 1)"
        )


def gains(curves: EngineCurves) -> list[Gain]:
    """Per engine, layout and window mode: its largest batch and its fastest one."""
    out = []
    for engine in curves.engines:
        ceiling = curves.ceilings[engine]
        for layout, windows in dict.fromkeys((r.layout, r.windows) for r in ceiling.rows):
            rows = [r for r in ceiling.rows if (r.layout, r.windows) == (layout, windows)]
            largest = max(rows, key=lambda r: r.batch_size)
            best = max(rows, key=lambda r: r.audio_per_wall)
            out.append(Gain(engine, ceiling, largest, best))
    return out


def curve_table(curves: EngineCurves) -> str:
    """Markdown: per point, each engine's median (min – max) and gain over batch 1, then
    each other engine over the first; a line per engine, layout and window mode below."""
    first, others = curves.engines[0], curves.engines[1:]
    head = ["layout", "windows", "batch", "mean batch"]
    for engine in curves.engines:
        head += [f"{engine} audio s / s (min – max)", "× batch 1"]
    head += [f"{engine} ÷ {first}" for engine in others]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for like in curves.ceilings[first].rows:
        mean = curves.mean_batch.get((like.windows, like.batch_size))
        cells = [like.layout, like.windows, str(like.batch_size), _fixed(mean, "")]
        for engine in curves.engines:
            ceiling = curves.ceilings[engine]
            row = find(ceiling, like)
            cells += ["–", "–"] if row is None else _curve_cells(ceiling, row)
        cells += [_fixed(over_first(curves, engine, like), "×") for engine in others]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += [gain.describe() for gain in gains(curves)]
    return "\n".join(lines)


def _curve_cells(ceiling: Ceiling, row: CeilingRow) -> list[str]:
    figure = f"{row.audio_per_wall:.2f} ({row.low:.2f} – {row.high:.2f})"
    return [figure, _fixed(over_batch_1(ceiling, row), "×")]


def engines_body(
    rows: Sequence[Row],
    curves: EngineCurves | None,
    engines: Sequence[str],
    compute_types: dict[str, str],
) -> dict[str, Any]:
    """The JSON's ``engines``: the served side by side, the curves, and each engine's own
    ceiling report."""
    return {
        "engines": list(engines),
        "compute_types": compute_types,
        "served": served_body(side_by_side(rows), engines),
        "curve": None if curves is None else curve_body(curves),
        "gains": None if curves is None else [gain.as_dict() for gain in gains(curves)],
        "alone": None
        if curves is None
        else {engine: ceiling.as_dict() for engine, ceiling in curves.ceilings.items()},
    }


def engines_report(rows: Sequence[Row], curves: EngineCurves | None, engines: Sequence[str]) -> str:
    parts = []
    if rows:
        parts += ["served, side by side:", served_table(side_by_side(rows), engines)]
    if curves is not None:
        parts += ["", "the engines alone, side by side:", curve_table(curves)]
    return "\n".join(parts)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _fixed(value: float | None, unit: str) -> str:
    return "–" if value is None else f"{value:.2f}{unit}"
