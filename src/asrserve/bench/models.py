"""``asrserve bench models a,b``: several models served at once, beside each one alone.

Each model first runs alone, on a server that serves only it, under all the clients; then one
server serves every model, the clients split evenly between them. Every client loops (closed
loop) until each model has completed its requests, so together the models compete for the
devices over the whole measurement, not only until the faster one is done. A model's figure
is the audio of its requests over the time to its last answer; ``× alone`` is that figure
together against the same figure alone: the share of the devices the model got. Their sum
says how much of the devices' capacity sharing kept (1.00: switching models costs nothing).
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from asrserve.bench.load import AudioFile, Sample, limits, send
from asrserve.bench.wer import wer
from asrserve.cli.server_process import ServerProcess

ALONE, TOGETHER = "alone", "together"


@dataclass(frozen=True)
class ModelsScenario:
    models: Sequence[str]
    clients: int = 16
    requests: int = 16  # answers each model must have before the clients stop
    server_env: dict[str, str] = field(default_factory=dict)
    language: str = "en"  # the corpus's: a multilingual model transcribes, detects nothing


@dataclass(frozen=True)
class Share:
    """One model's figures in one run (``alone`` or ``together``)."""

    run: str
    model: str
    clients: int
    requests: int
    errors: int
    audio_s: float
    wall_s: float
    wer: float | None = None

    @classmethod
    def of(cls, run: str, model: str, clients: int, samples: list[Sample], wall: float) -> Share:
        ok = [s for s in samples if s.status == 200]
        pairs = [(s.file.reference, s.text) for s in ok if s.file.reference is not None]
        score = (
            wer([r for r, _ in pairs if r is not None], [h for _, h in pairs]) if pairs else None
        )
        audio = sum(s.file.duration for s in ok)
        return cls(run, model, clients, len(samples), len(samples) - len(ok), audio, wall, score)

    @property
    def throughput(self) -> float:
        """Audio seconds answered per wall second."""
        return self.audio_s / self.wall_s if self.wall_s else 0.0


def measure_models(files: list[AudioFile], scenario: ModelsScenario) -> list[Share]:
    """Each model alone, then all together, each run on a fresh server of its own."""
    shares: list[Share] = []
    with tempfile.TemporaryDirectory(prefix="asrserve-bench-models-") as tmp:
        cache = {"ASRSERVE_MODEL_CACHE_DIR": str(Path(tmp) / "models")}  # base joined once
        runs = [(ALONE, [model]) for model in scenario.models]
        runs.append((TOGETHER, list(scenario.models)))
        for index, (run, models) in enumerate(runs):
            env = {**scenario.server_env, **cache, "ASRSERVE_MODELS": ",".join(models)}
            server = ServerProcess(Path(tmp) / f"data{index}", env=env).start(timeout=300)
            try:
                shares.extend(asyncio.run(_measure(server.url, files, run, models, scenario)))
            finally:
                server.stop()
            print(f"  {' + '.join(models)} {run}: done", flush=True)
    return shares


def split(clients: int, models: Sequence[str]) -> dict[str, int]:
    """``clients`` spread evenly over ``models`` (the first ones take what is left over)."""
    each, left = divmod(clients, len(models))
    return {model: each + (index < left) for index, model in enumerate(models)}


async def _measure(
    url: str, files: list[AudioFile], run: str, models: list[str], scenario: ModelsScenario
) -> list[Share]:
    fields = {
        m: {"model": m, "language": scenario.language, "response_format": "json"} for m in models
    }
    pool = limits(max(scenario.clients, 64))
    async with httpx.AsyncClient(base_url=url, timeout=3600, limits=pool) as client:
        for model in models:  # warm-up: each replica's first batch pays one-off costs
            await asyncio.gather(*(send(client, f, fields[model]) for f in files[:2]))
        clients = split(scenario.clients, models)
        results = await _closed_loops(client, files, clients, scenario.requests, fields)
    return [Share.of(run, m, clients[m], *results[m]) for m in models]


async def _closed_loops(
    client: httpx.AsyncClient,
    files: list[AudioFile],
    clients: Mapping[str, int],
    requests: int,
    fields: Mapping[str, dict[str, str]],
) -> dict[str, tuple[list[Sample], float]]:
    """Each model's clients send its files in turn until every model has ``requests``
    answers: (its samples, seconds from the start to its last answer) per model."""
    samples: dict[str, list[Sample]] = {model: [] for model in clients}
    last = dict.fromkeys(clients, 0.0)
    orders: dict[str, Iterator[AudioFile]] = {m: itertools.cycle(files) for m in clients}
    start = time.perf_counter()

    async def loop(model: str) -> None:
        while min(len(answered) for answered in samples.values()) < requests:
            samples[model].append(await send(client, next(orders[model]), fields[model]))
            last[model] = time.perf_counter() - start

    await asyncio.gather(*(loop(m) for m, n in clients.items() for _ in range(n)))
    return {model: (samples[model], last[model]) for model in clients}


def models_report(shares: Sequence[Share]) -> str:
    """A markdown table: each model alone, then together with its share of its alone figure,
    and the total together."""
    lines = [
        "| run | model | clients | req | err | audio s | wall s | audio s / wall s "
        "| × alone | WER |",
        "|" + "---|" * 10,
    ]
    body = models_body(shares)
    for row in body["rows"]:
        ratio = "–" if row["x_alone"] is None else f"{row['x_alone']:.2f}×"
        lines.append(_line(row, ratio))
    total = body["together"]
    lines.append(_line(total, f"Σ {total['x_alone']:.2f}×"))
    lines.append("")
    lines.append(
        f"together: {total['audio_s_per_wall_s']:.2f} audio s / wall s in all; the models' "
        f"shares of their alone figures sum to {total['x_alone']:.2f} (1.00: no capacity lost "
        "to sharing the devices)"
    )
    return "\n".join(lines)


def _line(row: Mapping[str, Any], ratio: str) -> str:
    wer_text = "–" if row["wer"] is None else f"{row['wer']:.4f}"
    return (
        f"| {row['run']} | {row['model']} | {row['clients']} | {row['requests']} "
        f"| {row['errors']} | {row['audio_s']:.1f} | {row['wall_s']:.1f} "
        f"| {row['audio_s_per_wall_s']:.2f} | {ratio} | {wer_text} |"
    )


def models_body(shares: Sequence[Share]) -> dict[str, Any]:
    """The figures as JSON: a row per model and run, and the total together."""
    alone = {s.model: s.throughput for s in shares if s.run == ALONE}
    rows = []
    for share in shares:
        reference = alone.get(share.model) if share.run == TOGETHER else None
        ratio = share.throughput / reference if reference else None
        rows.append(_row(share, ratio))
    together = [s for s in shares if s.run == TOGETHER]
    wall = max((s.wall_s for s in together), default=0.0)
    total = Share(
        TOGETHER,
        "all",
        sum(s.clients for s in together),
        sum(s.requests for s in together),
        sum(s.errors for s in together),
        sum(s.audio_s for s in together),
        wall,
    )
    capacity = sum(row["x_alone"] or 0.0 for row in rows)
    return {"rows": rows, "together": _row(total, capacity)}


def _row(share: Share, ratio: float | None) -> dict[str, Any]:
    return {
        "run": share.run,
        "model": share.model,
        "clients": share.clients,
        "requests": share.requests,
        "errors": share.errors,
        "audio_s": round(share.audio_s, 2),
        "wall_s": round(share.wall_s, 3),
        "audio_s_per_wall_s": round(share.throughput, 3),
        "x_alone": None if ratio is None else round(ratio, 3),
        "wer": None if share.wer is None else round(share.wer, 4),
    }
