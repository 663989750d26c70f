"""What a request's keywords cost (``asrserve bench keywords``): the engine alone.

The corpus's windows (as the service cuts them: VAD, then its encoder windows) run on the
served layout's replicas in batches of ``max_batch_size``, as ``bench fallback`` runs them,
once without keywords and once with them, ``repeats`` times each, the order alternating
(without then with, then with then without, ...) so that a slow minute falls on both. With
keywords the engine decodes each window twice on its one encoder pass, with them and
without them (``engine/keywords.py``). The report gives each side's median wall time, the
ratio of the two and, from each side's last run, its WER against the references and
``kept_windows``: the windows whose text with keywords spells a keyword that their text
without them does not. That is the engine's own test (``keeps_keywords``) on the two runs'
texts: it counts the windows that kept their decode with keywords wherever a window decoded
without keywords comes out the same in both runs (``changed_windows``, the windows whose
texts differ, is then the same count).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from asrserve.bench.ceiling_layout import Decoded, run_batches, window_batches
from asrserve.bench.engine_alone import service_windows, wall_figures
from asrserve.bench.engines import compute_types
from asrserve.bench.load import AudioFile
from asrserve.bench.wer import wer
from asrserve.engine.base import ChunkInput
from asrserve.engine.keywords import keeps_keywords
from asrserve.engine.registry import engine_choice, load_engines
from asrserve.settings import Settings
from asrserve.vocabulary import TranscriptionOptions

# Terms the bench corpus never says: names, a made-up word, product names, a city.
DEFAULT_KEYWORDS = (
    "Siobhan Nakamura",
    "Zyqlo",
    "Grafana",
    "Pydantic",
    "Szczecin",
    "Siddharth Raghunathan",
)
WITHOUT, WITH = "without keywords", "with keywords"


def keyword_terms(text: str) -> tuple[str, ...]:
    """``--keywords a,b,c``: the terms, each stripped; at least one."""
    terms = tuple(term.strip() for term in text.split(",") if term.strip())
    if not terms:
        raise argparse.ArgumentTypeError(
            f"name a keyword or more, e.g. Grafana,Zyqlo, not {text!r}"
        )
    return terms


def side_order(repetition: int) -> tuple[str, str]:
    """The sides of one repetition, in the order they run: alternating from one to the next."""
    return (WITHOUT, WITH) if repetition % 2 == 0 else (WITH, WITHOUT)


def window_texts(decoded: Decoded) -> dict[int, str]:
    """Each decoded window's text (its segments' texts, stripped, joined by a space), by
    the ``id`` of its chunk."""
    return {
        id(chunk): " ".join(t for s in segments if (t := s.text.strip()))
        for batch, results in decoded
        for chunk, segments in zip(batch, results, strict=True)
    }


def file_text(chunks: Sequence[ChunkInput], texts: dict[int, str]) -> str:
    """A file's text: its windows' texts in order, the empty ones left out."""
    return " ".join(text for chunk in chunks if (text := texts[id(chunk)]))


def kept_windows(with_them: dict[int, str], without: dict[int, str], terms: Sequence[str]) -> int:
    """The windows whose text with keywords spells a term their text without them does not."""
    return sum(keeps_keywords(text, without[key], terms) for key, text in with_them.items())


def changed_windows(with_them: dict[int, str], without: dict[int, str]) -> int:
    """The windows whose text with keywords differs from their text without them."""
    return sum(text != without[key] for key, text in with_them.items())


def measure_keywords(
    files: list[AudioFile], settings: Settings, repeats: int, terms: Sequence[str]
) -> dict[str, Any]:
    """Both sides, alternately, on one set of windows; the report's body."""
    engines = [next(iter(models.values())) for models in load_engines(settings)]
    per_file = service_windows([f.path for f in files], engines[0], settings)
    chunks = [chunk for file_chunks in per_file for chunk in file_chunks]
    batches = window_batches(chunks, settings.max_batch_size)
    plain = TranscriptionOptions(beam_size=settings.beam_size)
    options = {WITHOUT: plain, WITH: plain.model_copy(update={"keywords": tuple(terms)})}
    for side in (WITHOUT, WITH):  # warm-up, untimed
        run_batches(engines, batches[:1] * len(engines), options[side])
    walls: dict[str, list[float]] = {WITHOUT: [], WITH: []}
    texts: dict[str, dict[int, str]] = {}
    for repetition in range(repeats):
        for side in side_order(repetition):
            start = time.perf_counter()
            decoded = run_batches(engines, batches, options[side])
            walls[side].append(time.perf_counter() - start)
            texts[side] = window_texts(decoded)  # the last repetition's
    audio = sum(chunk.duration for chunk in chunks)
    scored = [(f, c) for f, c in zip(files, per_file, strict=True) if f.reference is not None]
    engine = engine_choice(settings).engine
    kind = compute_types(settings.model_copy(update={"engine": engine}), [engine])[engine]
    return {
        "engine": engine,
        "compute_type": kind,
        "keywords": list(terms),
        "beam_size": settings.beam_size,
        "windows": len(chunks),
        "audio_s": round(audio, 2),
        "batch_size": settings.max_batch_size,
        "replicas": len(engines),
        "repeats": repeats,
        "kept_windows": kept_windows(texts[WITH], texts[WITHOUT], terms),
        "changed_windows": changed_windows(texts[WITH], texts[WITHOUT]),
        "sides": {
            side: {
                **wall_figures(w, audio),
                "walls_s": [round(wall, 3) for wall in w],  # in the order they ran
                "wer": _wer(scored, texts[side]),
            }
            for side, w in walls.items()
        },
        "with_over_without": round(
            statistics.median(walls[WITH]) / statistics.median(walls[WITHOUT]), 3
        ),
    }


def _wer(scored: list[tuple[AudioFile, list[ChunkInput]]], texts: dict[int, str]) -> float | None:
    """The files' WER against their references (None: no file has one)."""
    if not scored:
        return None
    hypotheses = [file_text(chunks, texts) for _, chunks in scored]
    return round(wer([f.reference or "" for f, _ in scored], hypotheses), 4)


def keywords_report(body: dict[str, Any]) -> str:
    lines = [
        f"keywords ({len(body['keywords'])}: {', '.join(body['keywords'])}), "
        f"{body['engine']} ({body['compute_type']}), beam {body['beam_size']}, "
        f"{body['windows']} windows ({body['audio_s']} s of speech), "
        f"batches of {body['batch_size']} on {body['replicas']} replica(s), "
        f"median of {body['repeats']}",
        f"windows that kept the decode with keywords: {body['kept_windows']} of "
        f"{body['windows']}; windows whose text changed: {body['changed_windows']}",
        "| side | wall s, median (min–max) | audio s/s | WER |",
        "|---|---|---|---|",
    ]
    for side, figures in body["sides"].items():
        score = "–" if figures["wer"] is None else f"{figures['wer']:.4f}"
        lines.append(
            f"| {side} | {figures['median_wall_s']} ({figures['min_wall_s']}–"
            f"{figures['max_wall_s']}) | {figures['audio_s_per_s']} | {score} |"
        )
    lines.append(f"wall time with keywords / without them: {body['with_over_without']:.2f}")
    return "\n".join(lines)
