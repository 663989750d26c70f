"""How the CPU cores are shared out: replicas (device loops) × threads per replica.

On the CPU a replica is a share of the cores that runs one batch at a time. Whisper's
decoder is a long chain of small steps that a second thread speeds up little, while two
batches on one thread each keep both cores busy: on 2 cores, tiny.en int8 ran 62.17 audio
s/s as 2 replicas × 1 thread against at best 33.97 as 1 × 2 on the engine alone, and
``greedy`` served 16 clients 36.90 against 24.22 (docs/bench/cpu-2core-layouts.json;
docs/benchmarks.md, "The ceiling"; ``asrserve bench --ceiling`` measures every layout).
So ``auto`` gives a replica per core, one thread each, up to ``MAX_AUTO_REPLICAS``
replicas; past that, the cores are split evenly between them. Replicas of one model on
the CPU share one copy of its weights (CTranslate2's ``inter_threads``), so more replicas
cost activations, not weights.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

MAX_AUTO_REPLICAS = 8  # beyond this, a batch per core leaves each batch too small to pay
Auto = Literal["auto"]


@dataclass(frozen=True)
class Layout:
    replicas: int
    threads: int
    source: str  # how it was chosen: "settings", or the rule that picked it

    def as_dict(self) -> dict[str, int | str]:
        return {"replicas": self.replicas, "threads": self.threads, "source": self.source}


def usable_cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cpu_layout(replicas: int | Auto, threads: int | Auto, cores: int) -> Layout:
    """The layout the settings ask for, with ``auto`` (and threads 0) filled from ``cores``."""
    asked_replicas = replicas if isinstance(replicas, int) else None
    asked_threads = threads if isinstance(threads, int) and threads > 0 else None
    if asked_replicas is not None and asked_threads is not None:
        return Layout(asked_replicas, asked_threads, "settings")
    if asked_replicas is not None:
        threads_each = max(1, cores // asked_replicas)
        return Layout(asked_replicas, threads_each, "settings: threads share the cores")
    if asked_threads is not None:
        count = max(1, cores // asked_threads)
        return Layout(count, asked_threads, "settings: replicas fill the cores")
    count = min(cores, MAX_AUTO_REPLICAS)
    each = max(1, cores // count)
    return Layout(count, each, f"auto: {count} replica(s) × {each} thread(s) on {cores} cores")
