"""Where this process's CPU goes: each thread's CPU seconds (``/proc/self/task``), grouped
by what the thread does, so a node can say what share of its cores the engine gets.

Python threads are known by name (``threading.enumerate`` maps their native ids); threads
Python did not start are the engine's own (CTranslate2's and OpenMP's compute threads).
A thread that ended takes its seconds with it: the groups are the live threads'. Linux
only; elsewhere the split is empty.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from pathlib import Path

TASKS = Path("/proc/self/task")
GROUPS = (  # (thread name prefix, group), first match wins
    ("MainThread", "event loop (HTTP, scheduler, stores)"),
    ("preprocess", "preprocessing (decode, VAD, features)"),
    ("device-", "device threads (engine calls)"),
    ("asyncio", "asyncio worker threads (file and store calls)"),
)
ENGINE = "engine's own threads (forward passes)"
OTHER = "other Python threads"


def group(name: str | None) -> str:
    if name is None:
        return ENGINE
    return next((label for prefix, label in GROUPS if name.startswith(prefix)), OTHER)


def cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) each group of this process's live threads has used."""
    try:
        tasks = list(os.scandir(TASKS))
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return {}
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    seconds: defaultdict[str, float] = defaultdict(float)
    for task in tasks:
        try:
            stat = Path(task.path, "stat").read_text()
        except OSError:  # the thread ended
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the name: state, ppid, …
        used = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        seconds[group(names.get(int(task.name)))] += used
    return {label: round(value, 2) for label, value in sorted(seconds.items())}
