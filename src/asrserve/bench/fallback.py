"""What the temperature fallback costs (``asrserve bench fallback``): the engine alone.

The corpus's windows (as the service cuts them: VAD, then its encoder windows) run on the
served layout's replicas in batches of ``max_batch_size``, once with the fallback ladder
and once without it (temperature 0 alone), alternately, ``repeats`` times each; the
report gives each side's median throughput and what the fallback did: how many windows
failed their first decode, and how many decodes ran at each temperature.
"""

from __future__ import annotations

import time
from typing import Any

from asrserve.bench.ceiling_layout import run_batches, window_batches
from asrserve.bench.engine_alone import service_windows, wall_figures
from asrserve.bench.load import AudioFile
from asrserve.engine.fallback import FallbackCounts
from asrserve.engine.whisper import FasterWhisperEngine
from asrserve.settings import Settings
from asrserve.vocabulary import Task, TranscriptionOptions


def _engines(settings: Settings) -> list[FasterWhisperEngine]:
    from asrserve.engine.loading import load

    engines = [next(iter(models.values())) for models in load(settings, settings.model_cache)]
    return [engine for engine in engines if isinstance(engine, FasterWhisperEngine)]


def measure_fallback(
    files: list[AudioFile], settings: Settings, repeats: int, task: Task = Task.TRANSCRIBE
) -> dict[str, Any]:
    """Both sides, alternately, on one set of windows; the report's body."""
    sides = {
        "fallback": _engines(settings),
        "no fallback": _engines(settings.model_copy(update={"fallback_temperatures": (0.0,)})),
    }
    per_file = service_windows([f.path for f in files], sides["fallback"][0], settings)
    chunks = [chunk for file_chunks in per_file for chunk in file_chunks]
    batches = window_batches(chunks, settings.max_batch_size)
    options = TranscriptionOptions(beam_size=settings.beam_size, task=task)
    audio = sum(chunk.duration for chunk in chunks)
    walls: dict[str, list[float]] = {side: [] for side in sides}
    for engines in sides.values():  # warm-up, untimed
        run_batches(engines, batches[:1] * len(engines), options)
    for _ in range(repeats):
        for side, engines in sides.items():
            for engine in engines:
                engine.fallback_counts = FallbackCounts()
            start = time.perf_counter()
            run_batches(engines, batches, options)
            walls[side].append(time.perf_counter() - start)
    counts = FallbackCounts()
    for engine in sides["fallback"]:
        counts.add(engine.fallback_counts)  # the last repetition's
    return {
        "task": task.value,
        "windows": len(chunks),
        "audio_s": round(audio, 2),
        "batch_size": settings.max_batch_size,
        "replicas": len(sides["fallback"]),
        "retried_windows": counts.retried,
        "decodes_by_temperature": {str(t): n for t, n in sorted(counts.decodes.items())},
        "sides": {side: wall_figures(w, audio) for side, w in walls.items()},
    }


def fallback_report(body: dict[str, Any]) -> str:
    on, off = body["sides"]["fallback"], body["sides"]["no fallback"]
    decodes = ", ".join(f"{t}: {n}" for t, n in body["decodes_by_temperature"].items())
    lines = [
        f"temperature fallback, {body['task']}, {body['windows']} windows "
        f"({body['audio_s']} s of speech), "
        f"batches of {body['batch_size']} on {body['replicas']} replica(s)",
        f"windows decoded again: {body['retried_windows']} of {body['windows']}; "
        f"decodes by temperature: {decodes}",
        "| side | audio s/s (median) | wall s (min–max) |",
        "|---|---|---|",
    ]
    for side, figures in body["sides"].items():
        lines.append(
            f"| {side} | {figures['audio_s_per_s']} | {figures['median_wall_s']} "
            f"({figures['min_wall_s']}–{figures['max_wall_s']}) |"
        )
    ratio = on["audio_s_per_s"] / off["audio_s_per_s"]
    lines.append(f"throughput with the fallback / without it: {ratio:.2f}")
    return "\n".join(lines)
