"""``asrserve bench --engines A,B``: the served rows once per engine, side by side.

Every policy (and encoder window mode) runs on a server of each engine in turn, the
engines' servers one right after the other, so that a slow minute of the machine falls on
both alike; the rows carry their engine. The report puts each (policy, load) side by side:
each engine's throughput, latency, WER and batches, and each engine's throughput over the
first engine's. The engines alone, on the same windows: ``bench/engine_curve.py``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from asrserve.bench.runner import Row
from asrserve.engine.registry import ENGINES
from asrserve.settings import Settings


def engine_names(text: str) -> tuple[str, ...]:
    """``--engines``: registered engines, each once. ``auto`` is not one: it picks one."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in ENGINES]
    if not names or unknown:
        registered = ", ".join(sorted(ENGINES))
        raise argparse.ArgumentTypeError(f"name engines among {registered}, not {text!r}")
    if len(set(names)) < len(names):
        raise argparse.ArgumentTypeError(f"{text!r} names an engine twice")
    return names


@dataclass(frozen=True)
class SideBySide:
    """One policy under one load, on each engine that ran it."""

    policy: str
    pattern: str
    rows: dict[str, Row]  # by engine

    def over(self, engine: str, reference: str) -> float | None:
        """``engine``'s throughput over ``reference``'s (None: one of them is missing)."""
        one, ref = self.rows.get(engine), self.rows.get(reference)
        if one is None or ref is None or not ref.result.audio_per_wall:
            return None
        return one.result.audio_per_wall / ref.result.audio_per_wall


def side_by_side(rows: Sequence[Row]) -> list[SideBySide]:
    """The rows grouped by (policy, load), in the order they ran."""
    groups: dict[tuple[str, str], dict[str, Row]] = {}
    for row in rows:
        if row.engine is not None:
            groups.setdefault((row.policy, row.pattern), {})[row.engine] = row
    return [SideBySide(policy, pattern, by) for (policy, pattern), by in groups.items()]


def served_body(pairs: Sequence[SideBySide], engines: Sequence[str]) -> list[dict[str, Any]]:
    """The JSON of the served side by side: per engine its figures, and ``over_FIRST``:
    each other engine's throughput over the first's."""
    first, others = engines[0], engines[1:]
    body = []
    for pair in pairs:
        entry: dict[str, Any] = {"policy": pair.policy, "pattern": pair.pattern}
        for engine in engines:
            row = pair.rows.get(engine)
            entry[engine] = None if row is None else _figures(row.as_dict())
        entry[f"over_{first}"] = {e: _rounded(pair.over(e, first)) for e in others}
        body.append(entry)
    return body


def _figures(row: dict[str, Any]) -> dict[str, Any]:
    names = ("requests", "errors", "audio_s_per_wall_s", "p50_s", "p95_s", "wer")
    return {name: row[name] for name in (*names, "mean_batch_size", "padding_waste")}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def served_table(pairs: Sequence[SideBySide], engines: Sequence[str]) -> str:
    """Markdown: per (policy, load), each engine's audio s / wall s, p50 / p95, WER and mean
    batch, then each other engine's throughput over the first's."""
    first, others = engines[0], engines[1:]
    head = ["policy", "load"]
    for engine in engines:
        head += [f"{engine} audio s / s", "p50 / p95 s", "WER", "mean batch"]
    head += [f"{engine} ÷ {first}" for engine in others]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for pair in pairs:
        cells = [pair.policy, pair.pattern]
        for engine in engines:
            cells += _cells(pair.rows.get(engine))
        cells += [_times(pair.over(engine, first)) for engine in others]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cells(row: Row | None) -> list[str]:
    if row is None:
        return ["–"] * 4
    d = row.as_dict()
    speed = f"{d['audio_s_per_wall_s']:.2f}" + (f" ({d['errors']} err)" if d["errors"] else "")
    latency = f"{d['p50_s']:.2f} / {d['p95_s']:.2f}"
    return [speed, latency, str(d["wer"]), str(d["mean_batch_size"])]


def _times(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def compute_types(settings: Settings, engines: Sequence[str]) -> dict[str, str]:
    """What each engine runs the weights in on the settings' device (CPU: int8 on
    CTranslate2, float32 on PyTorch, unless ``compute_type`` says otherwise)."""
    kinds = {}
    for engine in engines:
        on = settings.model_copy(update={"engine": engine})
        kind = ENGINES[engine]()
        kinds[engine] = kind.compute_type(kind.resolve_device(on), on.compute_type)
    return kinds
