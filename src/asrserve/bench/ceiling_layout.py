"""One layout of the ceiling (``asrserve bench --ceiling``), run in a process of its own.

A fresh process per layout, so the memory it reports is that layout's alone: the model's
weights as its replicas share them, their activations and the precomputed features. The
features come from a file written once by the parent; they are read only after the engines
are loaded, so "after load" is the interpreter and the model, not the input.
"""

from __future__ import annotations

import multiprocessing
import pickle
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from asrserve.engine.base import ChunkInput, Engine, RawSegment
from asrserve.settings import Settings
from asrserve.vocabulary import TranscriptionOptions

Loader = Callable[[Settings], list[dict[str, Engine]]]
Modes = dict[str, list[ChunkInput]]  # window mode ("full", "bucketed") -> its chunks


@dataclass(frozen=True)
class Repeats:
    """How each row is measured: the chunks ``passes`` times over in one run (so every
    replica stays busy to the end even at the largest batch), the run ``repetitions`` times."""

    passes: int = 3
    repetitions: int = 3


DEFAULT_REPEATS = Repeats()


@dataclass(frozen=True)
class LayoutPlan:
    """What one child measures: a layout, the batch sizes, and where the features are."""

    replicas: int
    threads: int
    settings: Settings
    features: Path  # a pickled ``Modes``
    batch_sizes: tuple[int, ...]
    repeats: Repeats = DEFAULT_REPEATS


@dataclass(frozen=True)
class Measure:
    windows: str
    batch_size: int
    batches: int  # per repetition
    walls_s: tuple[float, ...]  # one per repetition, each of ``passes`` times the chunks
    peak_kib: int | None  # this measurement's high-water mark (None: not resettable here)


@dataclass(frozen=True)
class LayoutResult:
    replicas: int
    threads: int
    after_load_kib: int
    peak_kib: int  # the whole child's high-water mark
    measures: list[Measure] = field(default_factory=list)


def window_batches(chunks: Sequence[ChunkInput], size: int) -> list[list[ChunkInput]]:
    """Batches of at most ``size`` chunks, each of one encoder window only (never mixing
    padded lengths), like lengths together: sorted by (window frames, duration)."""
    ordered = sorted(chunks, key=lambda c: (c.features.shape[-1], c.duration))
    buckets: dict[int, list[ChunkInput]] = {}
    for chunk in ordered:
        buckets.setdefault(chunk.features.shape[-1], []).append(chunk)
    return [
        bucket[start : start + size]
        for bucket in buckets.values()
        for start in range(0, len(bucket), size)
    ]


Decoded = list[tuple[list[ChunkInput], list[list[RawSegment]]]]  # each batch, its results


def run_batches(
    engines: Sequence[Engine], batches: list[list[ChunkInput]], options: TranscriptionOptions
) -> Decoded:
    """Every batch once, each replica pulling the next one when it is free (as the
    scheduler's device loops do), the longest windows first so the tail is short. Returns
    each batch with its chunks' segments, in the order they finished."""
    queue: Iterator[list[ChunkInput]] = iter(sorted(batches, key=_frames, reverse=True))
    lock = threading.Lock()
    decoded: Decoded = []

    def loop(engine: Engine) -> None:
        while True:
            with lock:
                batch = next(queue, None)
            if batch is None:
                return
            results = engine.transcribe_batch(batch, options)
            with lock:
                decoded.append((batch, results))

    with ThreadPoolExecutor(len(engines)) as pool:
        list(pool.map(loop, engines))
    return decoded


def _frames(batch: list[ChunkInput]) -> int:
    return int(batch[0].features.shape[-1])


def measure_layout(plan: LayoutPlan, load: Loader | None = None) -> LayoutResult:
    """Load the layout's replicas, warm each up, then time every (window mode, batch size).
    The child process's entry; callable in-process with a fake ``load``."""
    layout = plan.settings.model_copy(
        update={"cpu_replicas": plan.replicas, "cpu_threads": plan.threads}
    )
    engines = [next(iter(models.values())) for models in (load or _load)(layout)]
    after_load = _status_kib("VmRSS")
    modes: Modes = pickle.loads(plan.features.read_bytes())
    options = TranscriptionOptions(beam_size=plan.settings.beam_size)
    smallest = [b for chunks in modes.values() for b in window_batches(chunks, 4)]
    if smallest:  # a warm-up batch on each replica, untimed
        run_batches(engines, [min(smallest, key=_frames)] * len(engines), options)
    measures = []
    for name, chunks in modes.items():
        for size in plan.batch_sizes:
            batches = window_batches(list(chunks) * plan.repeats.passes, size)
            resettable = _reset_peak()
            walls = []
            for _ in range(plan.repeats.repetitions):
                start = time.perf_counter()
                run_batches(engines, batches, options)
                walls.append(time.perf_counter() - start)
            peak = _status_kib("VmHWM") if resettable else None
            measures.append(Measure(name, size, len(batches), tuple(walls), peak))
    return LayoutResult(plan.replicas, plan.threads, after_load, _status_kib("VmHWM"), measures)


def features_mib(modes: Modes) -> float:
    return sum(c.features.nbytes for chunks in modes.values() for c in chunks) / 2**20


def write_features(modes: Modes, folder: Path) -> Path:
    """The chunks of every window mode, pickled once for the children to read."""
    path = folder / "features.pickle"
    path.write_bytes(pickle.dumps(modes, protocol=pickle.HIGHEST_PROTOCOL))
    return path


def in_child(plan: LayoutPlan) -> LayoutResult:
    """``plan`` measured in a fresh process (spawned: nothing of this one's state)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as child:
        return child.submit(measure_layout, plan).result()


def _load(settings: Settings) -> list[dict[str, Engine]]:
    """The replicas on the engine the settings name (``engine``; ``auto``: the device's)."""
    from asrserve.engine.registry import load_engines

    return load_engines(settings)


def _status_kib(key: str) -> int:
    """A ``/proc/self/status`` figure (KiB). ``VmHWM`` rather than ``ru_maxrss``: a spawned
    child's ``ru_maxrss`` starts at its parent's high-water mark (it survives fork and
    exec), so it would report the parent's memory, not the layout's."""
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


def _reset_peak() -> bool:
    """Reset this process's RSS high-water mark (Linux ``clear_refs`` 5), so each
    measurement reports its own peak; False where the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
    except OSError:
        return False
    return True
