"""The preprocessing pool's capacity beside the devices': its arithmetic (injected numbers),
and ``Inference.view`` (what ``GET /v1/scheduler`` returns) with the fake engine."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from asrserve.backends.backend import open_backend
from asrserve.bench.corpus import Clip
from asrserve.inference.preprocess_stats import PreprocessStats, bound
from asrserve.inference.runtime import start_inference
from asrserve.jobs.models import Job
from asrserve.metrics import Metrics
from asrserve.settings import Settings
from asrserve.vocabulary import Priority
from tests.support.fakes import FakeEngine


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_capacity_is_audio_per_busy_second_times_threads() -> None:
    stats = PreprocessStats(threads=4)
    stats.record(audio_seconds=30.0, busy_seconds=1.0)
    stats.record(audio_seconds=10.0, busy_seconds=3.0)
    assert stats.capacity() == pytest.approx(40.0 / 4.0 * 4)


def test_capacity_is_unknown_until_pool_time_was_measured() -> None:
    assert PreprocessStats(threads=4).capacity() is None


def test_busy_fraction_is_busy_thread_seconds_over_elapsed_thread_seconds() -> None:
    clock = Clock()
    stats = PreprocessStats(threads=4, clock=clock)
    stats.record(audio_seconds=60.0, busy_seconds=20.0)
    clock.now += 10.0
    assert stats.busy_fraction() == pytest.approx(20.0 / (10.0 * 4))


@pytest.mark.parametrize(
    ("preprocessing", "devices", "expected"),
    [
        (8.0, 10.0, "preprocessing"),
        (12.0, 10.0, "devices"),
        (10.0, 10.0, "devices"),
        (None, 10.0, None),
        (8.0, None, None),
    ],
)
def test_bound_is_the_smaller_capacity(
    preprocessing: float | None, devices: float | None, expected: str | None
) -> None:
    assert bound(preprocessing, devices) == expected


def test_the_view_shows_the_pool_beside_the_devices(corpus: list[Clip], tmp_path: Path) -> None:
    """Before any job: the configured threads, nothing measured, no bound. After one: the
    pool counted the audio it handed on in the devices' unit (the same seconds they ran)."""
    clip = min(corpus, key=lambda c: c.duration)
    settings = Settings(
        data_dir=tmp_path, encoder_window="full", record_traffic=False, preprocess_threads=3
    )

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        backend = open_backend(settings)
        inference = await start_inference(
            settings, backend, lambda _: [{"fake": FakeEngine()}], Metrics(), None
        )
        try:
            before = inference.view()
            job = Job(id="job_0", priority=Priority.ASYNC, audio_path=str(clip.path))
            finished = asyncio.Event()
            backend.events.on_finish(lambda notice: finished.set())
            await backend.store.create(job)
            await backend.queue.put(job.id, job.priority)
            await asyncio.wait_for(finished.wait(), 60)
            return before, inference.view()
        finally:
            await inference.stop()
            await backend.aclose()

    before, after = asyncio.run(main())
    assert before["preprocessing"] == {
        "threads": 3,
        "jobs": 0,
        "audio_seconds": 0.0,
        "busy_seconds": 0.0,
        "capacity": None,
        "busy_fraction": 0.0,
    }
    assert (before["devices_capacity"], before["bound"]) == (None, None)
    pool = after["preprocessing"]
    assert pool["jobs"] == 1
    assert after["audio_seconds"] > 0
    assert pool["audio_seconds"] == pytest.approx(after["audio_seconds"], abs=1e-3)
