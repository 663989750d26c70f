"""The daily quota in device seconds: each pass's share metered to its key's usage, and new
work of a key whose device seconds are used up refused (real SQLite key store)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pytest

from asrserve.auth.keys import DeviceUsage, KeyStore, utc_day
from asrserve.auth.principal import Principal
from asrserve.auth.quota import charge
from asrserve.auth.sqlite import SqliteKeyStore
from asrserve.batcher.clock import ManualClock
from asrserve.batcher.device import Device
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.cli.main import main
from asrserve.drivers.sqlite import Database
from asrserve.engine.base import ChunkInput
from asrserve.errors import QuotaExceeded
from asrserve.inference.device_meter import DeviceMeter
from asrserve.settings import Settings
from asrserve.speakers.models import SpeakerModel
from asrserve.vocabulary import Priority, TranscriptionOptions
from tests.support.fakes import FakeEngine
from tests.support.loop import Run

DAY = "2026-12-06"
OPTIONS = TranscriptionOptions()


@pytest.fixture
def keys(database: Database) -> KeyStore:
    return SqliteKeyStore(database)


class Held(Protocol):
    """A device part whose passes wait at ``gate`` once they have set ``entered``."""

    gate: threading.Event
    entered: threading.Event


Submit = Callable[[Scheduler], list["asyncio.Future[Any]"]]


async def metered(
    keys: KeyStore, device: Device, held: Held, passes: Sequence[tuple[Submit, float]]
) -> None:
    """Each of ``passes`` (its work submitted, the device seconds its pass takes) run alone on
    ``device``, metered to its keys' usage; the meter flushed after the last."""
    clock = ManualClock()
    scheduler = Scheduler([device], SchedulerConfig("greedy"), clock=clock)
    meter = DeviceMeter(keys, today=lambda: DAY)
    scheduler.shares.listeners.append(meter.charged)
    loops = asyncio.create_task(scheduler.run())
    try:
        for submit, seconds in passes:
            held.gate.clear()
            held.entered.clear()
            futures = submit(scheduler)
            assert await asyncio.to_thread(held.entered.wait, 5)
            clock.advance(seconds)  # the pass's device time
            held.gate.set()
            await asyncio.gather(*futures)
        await meter.flush()
    finally:
        loops.cancel()
        await asyncio.gather(loops, return_exceptions=True)
        scheduler.close()


def test_each_pass_is_metered_to_its_keys_by_their_windows(keys: KeyStore, run: Run) -> None:
    """A 3 s pass over two windows of a and one of b, then a 1 s pass over one of b and one
    of no key: a took 2 s of device for 20 s of audio, b 1 + 0.5 s for 10 + 1 s, and work of
    no key is not metered."""
    engine = FakeEngine()
    passes = [([("a", 1000), ("a", 1000), ("b", 1000)], 3.0), ([("b", 100), ("", 100)], 1.0)]

    def submit(windows: list[tuple[str, int]]) -> Submit:
        return lambda scheduler: [
            future
            for tenant, frames in windows
            for future in scheduler.submit_chunks(
                "job", Priority.ASYNC, OPTIONS, [_window(frames)], tenant=tenant
            )
        ]

    device = Device.of("0", engine)
    run(metered(keys, device, engine, [(submit(windows), s) for windows, s in passes]))
    assert [len(batch) for batch in engine.batches] == [3, 2]
    spent = [run(keys.spent(tenant, DAY)) for tenant in ("a", "b", "")]
    measured = [seconds for used in spent for seconds in (used.device_s, used.audio_s)]
    assert measured == pytest.approx([2.0, 20.0, 1.5, 11.0, 0.0, 0.0])


def _window(frames: int) -> ChunkInput:
    return ChunkInput(np.zeros((1, frames), dtype=np.float32), 0.0, frames / 100)


def test_a_key_whose_device_seconds_are_used_up_gets_no_new_work(keys: KeyStore, run: Run) -> None:
    principal = Principal("key_a", admin=False, audio_minutes_per_day=10, device_seconds_per_day=5)
    run(keys.spend({"key_a": DeviceUsage(4.5, 60.0)}, utc_day()))
    run(charge(keys, principal, 30.0))  # 4.5 s of 5 used: the request is taken
    run(keys.spend({"key_a": DeviceUsage(0.5, 0.0)}, utc_day()))
    with pytest.raises(QuotaExceeded, match="daily quota of 5 device seconds is used up"):
        run(charge(keys, principal, 30.0))
    assert run(keys.charge("key_a", utc_day(), 0.0, 600.0)) == 30.0  # the refused one: no audio


def test_the_keys_command_sets_a_keys_device_quota_over_the_servers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    create = ["keys", "create", "--data-dir", str(data), "--name"]
    assert main([*create, "metered", "--device-seconds-per-day", "90"]) == 0
    assert main([*create, "default"]) == 0
    settings = Settings(data_dir=data, quota_device_seconds_per_day=3600)
    db = Database(settings.db_path)
    try:
        stored = asyncio.run(SqliteKeyStore(db).all())
    finally:
        db.close()
    quotas = {key.name: Principal.of(key, settings).device_seconds_per_day for key in stored}
    assert quotas == {"metered": 90.0, "default": 3600.0}


class HeldSpeakers(SpeakerModel):
    """Speaker passes that wait at ``gate`` (entered: ``entered``)."""

    name, dimension = "held", 2

    def __init__(self) -> None:
        self.gate, self.entered = threading.Event(), threading.Event()

    def require(self) -> None:
        return None

    def _held(self) -> None:
        self.entered.set()
        assert self.gate.wait(5)

    def embed(self, banks: np.ndarray) -> np.ndarray:
        self._held()
        return np.zeros((len(banks), 2), np.float32)

    def segment(self, chunks: np.ndarray) -> np.ndarray:
        self._held()
        return np.zeros((len(chunks), 589, 3), dtype=bool)


def test_diarizations_passes_are_metered_as_device_time_not_audio(keys: KeyStore, run: Run) -> None:
    """A key's clips and segmentation chunks take 2 s and 3 s of a device: 5 device seconds
    on its usage, and no audio seconds (its file's windows count those)."""
    speakers = HeldSpeakers()
    clip, chunk = np.zeros((148, 80), np.float32), np.zeros(160_000, np.float32)
    passes: list[tuple[Submit, float]] = [
        (lambda s: list(s.submit_embed("job", Priority.ASYNC, [clip], None, tenant="a")), 2.0),
        (lambda s: list(s.submit_segment("job", Priority.ASYNC, [chunk], None, tenant="a")), 3.0),
    ]
    run(metered(keys, Device("0", {"m": FakeEngine()}, speakers), speakers, passes))
    used = run(keys.spent("a", DAY))
    assert (used.device_s, used.audio_s) == pytest.approx((5.0, 0.0))
