"""The calibration that seeds each device cost curve (``batcher/curve.py``) when the models
load, before the node takes work.

Real speech ships with the package (``calibration.flac``: 11 s of John F. Kennedy's
inaugural address, the faster-whisper repository's ``jfk.flac`` as 16 kHz mono). For each
served model and each encoder window its chunks may be padded to, every device runs the
same batch at once (so replicas that share cores and memory are measured sharing them), at
batch sizes 1, 2, 4, … up to ``max_batch_size``, a size not
doubled once a batch took ``LONGEST_BATCH_S`` or its throughput fell ``PAST_PEAK`` below the
best size's (the curve is past its peak; traffic explores above it, ``curve.py``). The cost
of a size is the median device's seconds per audio second. An untimed batch on each device
first pays the one-time costs.

A batch holds two kinds of chunk in turn, as traffic's batches hold chunks of different
texts and lengths: the speech from its start, and from a pause near its middle, each cut to
fit the window. Batched, a chunk whose text ends first still waits for the longest one's
decoding, a cost a batch of equal chunks never pays: measured on equal chunks, batches of 2
looked 1.2× as fast as 1 on this CPU's 5 and 10 s windows, where the engine alone on the
bench's clips ran them at 0.97×. Size 1 runs each kind once and adds them up, so every size
is measured on the same mix.

A calibration is stored under the data directory, named by what it measured (engine,
device, compute type, layout, models, windows, beam size), and read back by the next start
with the same ones (``calibration=stored``); ``fresh`` measures again, ``off`` starts
without (the curves then learn from traffic alone). A policy whose batches never hold more
than one window (``unbatched``, ``none``, or ``max_batch_size`` 1) needs none.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from asrserve.audio.decode import stream
from asrserve.batcher.device import Device
from asrserve.batcher.scheduler import Scheduler
from asrserve.engine.base import FRAMES_PER_SECOND, SAMPLING_RATE, ChunkInput
from asrserve.settings.scheduler import Calibration
from asrserve.vocabulary import TranscriptionOptions

log = logging.getLogger(__name__)

CLIP = Path(__file__).with_name("calibration.flac")
LONGEST_BATCH_S = 2.0  # a size is not doubled once one of its batches took this long...
PAST_PEAK = 0.9  # ...or once its throughput fell below this share of the best size's
MARGIN_S = 0.5  # the speech stays this far inside its window, as a chunk's would


def setup_name(setup: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(setup, sort_keys=True).encode()).hexdigest()
    return f"{digest[:16]}.json"


async def calibrate(
    scheduler: Scheduler,
    mode: Calibration,
    folder: Path,
    setup: dict[str, Any],
    windows: dict[str, tuple[float, ...]],
    beam_size: int,
) -> str:
    """Seed ``scheduler``'s curves: from ``folder`` (``stored``, if this ``setup`` was
    measured before) or by measuring each model on its ``windows``. What was done."""
    if mode is Calibration.OFF:
        return "off"
    policy = scheduler.policy
    if policy.whole_files or policy.max_batch_size <= 1:
        return "unneeded"  # its batches never hold more than one window: no size to choose
    limit = scheduler.curves.limit
    measured = {"windows": windows, "beam": beam_size, "limit": limit, "kinds": ["whole", "late"]}
    path = folder / setup_name({**setup, **measured})
    stored = await asyncio.to_thread(_read, path) if mode is Calibration.STORED else None
    if stored is not None:
        for point in stored:
            scheduler.curves.seed((point["model"], point["window_s"]), point["size"], point["cost"])
        log.info("calibration read from %s", path)
        return "stored"
    started = time.monotonic()
    speech = await asyncio.to_thread(_speech)
    points = []
    for model, model_windows in windows.items():
        options = TranscriptionOptions(model=model, language="en", beam_size=beam_size)
        for window in model_windows:
            kinds = [
                _chunk(scheduler.devices[0], model, speech, window, late) for late in (False, True)
            ]
            await _run(scheduler.devices, kinds[:1], options)  # untimed: one-time costs
            cheapest = float("inf")
            for size in _sizes(limit):
                batches = [[kind] for kind in kinds] if size == 1 else [_mix(kinds, size)]
                took = [
                    statistics.median(await _run(scheduler.devices, b, options)) for b in batches
                ]
                cost = sum(took) / sum(c.duration for b in batches for c in b)
                scheduler.curves.seed((model, window), size, cost)
                points.append({"model": model, "window_s": window, "size": size, "cost": cost})
                cheapest = min(cheapest, cost)
                if max(took) >= LONGEST_BATCH_S or cost > cheapest / PAST_PEAK:
                    break
    record = {"setup": setup, **measured, "points": points}
    await asyncio.to_thread(_write, path, record)
    log.info(
        "calibrated %d batch size(s) in %.1f s; batch sizes that pay: %s",
        len(points),
        time.monotonic() - started,
        ", ".join(
            f"{c['model']} {c['window_s']:g} s: {c['pays']}" for c in scheduler.curves.view()
        ),
    )
    return "measured"


def _read(path: Path) -> list[dict[str, Any]] | None:
    """A stored calibration's points; None if there is none (or it cannot be read)."""
    try:
        points: list[dict[str, Any]] = json.loads(path.read_text())["points"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return points


def _write(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record, indent=1))
    temporary.replace(path)


def _sizes(limit: int) -> list[int]:
    sizes = [1]
    while sizes[-1] * 2 <= limit:
        sizes.append(sizes[-1] * 2)
    return sizes if sizes[-1] == limit else [*sizes, limit]


def _speech() -> np.ndarray:
    blocks = list(stream(CLIP, max_seconds=60.0))
    return np.concatenate(blocks).astype(np.float32) / 32768.0


def _mix(kinds: list[ChunkInput], size: int) -> list[ChunkInput]:
    return [kinds[index % len(kinds)] for index in range(size)]


def _chunk(device: Device, model: str, speech: np.ndarray, window: float, late: bool) -> ChunkInput:
    """The speech cut to fit ``window`` (s), as features padded to it; ``late``: from the
    quietest 20 ms of the middle fifth of the speech on (another sentence, and for the
    longer windows less of it), so no word is cut in two (a cut word can send Whisper into
    the temperature fallback, and the calibration would time that)."""
    if late:
        frame = SAMPLING_RATE // 50
        levels = np.abs(speech[: len(speech) // frame * frame]).reshape(-1, frame).mean(axis=1)
        low, high = int(len(levels) * 0.4), int(len(levels) * 0.6)
        speech = speech[(low + int(np.argmin(levels[low:high]))) * frame :]
    audio = speech[: int(min(len(speech) / SAMPLING_RATE, window - MARGIN_S) * SAMPLING_RATE)]
    frames = round(window * FRAMES_PER_SECOND)
    features = device.engine_for(model).features(audio, frames)
    return ChunkInput(features=features, offset=0.0, duration=len(audio) / SAMPLING_RATE)


async def _run(
    devices: Sequence[Device], chunks: list[ChunkInput], options: TranscriptionOptions
) -> list[float]:
    """The same batch on every device at once: each device's seconds."""

    def timed(device: Device) -> float:
        engine = device.engine_for(options.model)
        engine.ensure_loaded()
        start = time.perf_counter()
        engine.transcribe_batch(chunks, options)
        return time.perf_counter() - start

    loop = asyncio.get_running_loop()
    return list(
        await asyncio.gather(*(loop.run_in_executor(d.executor, timed, d) for d in devices))
    )
