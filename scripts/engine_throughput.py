"""Engine-only throughput by threads, beam and batch size (docs/benchmarks.md).

Run: .venv/bin/python scripts/engine_throughput.py  (after `make bench` built .corpus/bench)
"""

from __future__ import annotations

import time
from pathlib import Path

from asrserve.app import load_engines
from asrserve.audio.features import prepare
from asrserve.corpus import load_refs
from asrserve.jobs.models import TranscriptionOptions
from asrserve.settings import Settings

root = Path(".corpus/bench")
refs = load_refs(root / "refs.json")
files = sorted(p for p in root.iterdir() if p.name in refs)[:16]
for threads in (1, 2):
    engine = load_engines(Settings(cpu_threads=threads, cpu_replicas=1))[0]
    prepared = [prepare(p, engine, max_seconds=1e9, vad=True) for p in files]
    chunks = sorted((c for p in prepared for c in p.chunks), key=lambda c: c.duration)
    audio = sum(c.duration for c in chunks)
    for beam in (5, 1):
        for size in (1, 4, 8, 16):
            options = TranscriptionOptions(beam_size=beam)
            start = time.perf_counter()
            for i in range(0, len(chunks), size):
                engine.transcribe_batch(chunks[i : i + size], options)
            elapsed = time.perf_counter() - start
            print(f"threads {threads} beam {beam} batch {size:2d}: {audio / elapsed:5.1f}x")
