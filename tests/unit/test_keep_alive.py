"""keep_alive (Ollama's): its values, a model's own default in ``ASRSERVE_MODELS``, a
request's field, and the scheduler's per-model release decisions under a manual clock."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from asrserve.batch_lines import InvalidInput, parse_input
from asrserve.batcher.clock import ManualClock
from asrserve.batcher.device import Device
from asrserve.batcher.residency import RETRY_RELEASE_S, ModelBusy
from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.engine.sources import resolve_models
from asrserve.errors import InvalidRequest
from asrserve.requests import parse_request
from asrserve.settings import Settings
from asrserve.settings.keep_alive import model_spec, parse_keep_alive
from asrserve.vocabulary import TranscriptionOptions
from tests.support.fakes import FakeEngine, chunk
from tests.support.loop import run_scheduler as run
from tests.support.loop import settle

URL = "/v1/audio/transcriptions"


@pytest.mark.parametrize(
    ("given", "seconds"),
    [
        ("300", 300.0),
        ("2.5", 2.5),
        ("0", 0.0),
        ("-1", -1.0),
        ("-300", -1.0),  # any negative: forever, as in Ollama
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("90s", 90.0),
        ("500ms", 0.5),
        ("-5m", -1.0),
        (" 10s ", 10.0),
        (60, 60.0),
    ],
)
def test_keep_alive_is_seconds_or_a_duration(given: str | float, seconds: float) -> None:
    assert parse_keep_alive(given) == seconds


@pytest.mark.parametrize("given", ["", "soon", "5x", "m", "5 m", "1h-30m", "inf", "nan", "1e999"])
def test_a_keep_alive_that_is_neither_is_refused(given: str) -> None:
    with pytest.raises(ValueError, match="keep_alive"):
        parse_keep_alive(given)


def test_a_model_entry_may_carry_its_own_keep_alive() -> None:
    assert model_spec("base:keep_alive=300") == ("base", 300.0)
    assert model_spec("base:keep_alive=5m") == ("base", 300.0)
    assert model_spec("tiny.en") == ("tiny.en", None)
    assert model_spec("/models/a:b") == ("/models/a:b", None)  # a colon in a path, no option
    with pytest.raises(ValueError, match="unknown option 'keep'"):
        model_spec("base:keep=300")
    with pytest.raises(ValueError, match="base:keep_alive=soon"):
        model_spec("base:keep_alive=soon")


def test_a_model_directory_is_resolved_with_its_own_keep_alive(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    for name in ("model.bin", "config.json"):
        (folder / name).write_bytes(b"{}")
    settings = Settings(models=f"{folder}:keep_alive=1m", data_dir=tmp_path / "data")
    (source,) = resolve_models(settings, settings.model_cache)
    assert (source.id, source.path, source.keep_alive) == ("mine", folder, 60.0)


def test_settings_check_model_entries_and_keep_the_old_idle_setting_as_the_default() -> None:
    settings = Settings(models="tiny.en,base:keep_alive=5m")
    assert settings.models == ("tiny.en", "base:keep_alive=5m")
    assert (settings.keep_alive, Settings(model_idle_s=120).keep_alive) == (-1.0, 120.0)
    with pytest.raises(ValidationError, match="unknown option 'kept'"):
        Settings(models="base:kept=1")


def test_a_requests_keep_alive_field_is_parsed_or_refused_naming_it() -> None:
    catalog = Catalog.of([ModelInfo("tiny.en", False, 5)])
    assert parse_request({"keep_alive": ["5m"]}, catalog).keep_alive == 300.0
    assert parse_request({}, catalog).keep_alive is None
    with pytest.raises(InvalidRequest) as refused:
        parse_request({"keep_alive": ["later"]}, catalog)
    assert refused.value.param == "keep_alive"


def test_a_batch_api_line_carries_keep_alive_like_the_form() -> None:
    catalog = Catalog.of([ModelInfo("tiny.en", False, 5)])

    def line(keep_alive: object) -> io.BytesIO:
        body = {"file": "file-1", "keep_alive": keep_alive}
        request = {"custom_id": "a", "method": "POST", "url": URL, "body": body}
        return io.BytesIO(json.dumps(request).encode())

    (parsed,) = parse_input(line(-1), catalog, 10, 2**20)
    assert parsed.request.keep_alive == -1.0
    with pytest.raises(InvalidInput) as refused:
        parse_input(line("later"), catalog, 10, 2**20)
    (error,) = refused.value.errors
    assert (error.code, error.param) == ("invalid_body", "body.keep_alive")


def pair() -> tuple[FakeEngine, FakeEngine, Device]:
    a, b = FakeEngine(model_id="a"), FakeEngine(model_id="b")
    return a, b, Device.of("0", a, b)


async def job(s: Scheduler, model: str, keep_alive: float | None, seconds: float = 1.0) -> None:
    """One job of ``model`` as the transcriber runs it: begun, its chunk run, ended."""
    s.residency.begin(model)
    try:
        options = TranscriptionOptions(model=model)
        await asyncio.gather(*s.submit_chunks("j", 1, options, [chunk(seconds)]))
    finally:
        s.residency.end(model, keep_alive)


def test_by_default_models_stay_loaded_for_good() -> None:
    a, _, device = pair()

    async def body(s: Scheduler, clock: ManualClock) -> None:
        await job(s, "a", None)
        clock.advance(10**6)
        assert s.residency.keep_alive("a") == -1.0
        assert s.residency.release_at(device, "a") is None

    run(SchedulerConfig(), [device], body)
    assert a.loaded and not a.unloaded.is_set()


def test_keep_alive_0_releases_the_model_once_its_last_job_ends() -> None:
    a, b, device = pair()

    async def body(s: Scheduler, clock: ManualClock) -> None:
        s.residency.begin("a")  # another job of a is still running
        await job(s, "a", 0.0)
        assert s.residency.release_at(device, "a") is None  # busy: never under its work
        s.residency.end("a", 0.0)
        assert await asyncio.to_thread(a.unloaded.wait, 5)  # no clock advance needed

    run(SchedulerConfig(), [device], body)
    assert b.loaded  # the other model keeps its own keep_alive (forever)


def test_pending_or_running_work_keeps_a_model_loaded_whatever_its_keep_alive() -> None:
    a, _, device = pair()

    async def body(s: Scheduler, clock: ManualClock) -> None:
        await job(s, "a", 0.0)
        assert await asyncio.to_thread(a.unloaded.wait, 5)
        a.gate.clear()  # hold a batch of a on the device
        a.entered.clear()  # set by the job's batch above
        running = s.submit_chunks("j1", 1, TranscriptionOptions(model="a"), [chunk(1.0)])
        assert await asyncio.to_thread(a.entered.wait, 5)
        assert (a.loaded, device.running) == (True, "a")  # reloaded for its batch
        assert s.residency.release_at(device, "a") is None
        with pytest.raises(ModelBusy):
            await s.residency.unload("a")
        a.gate.set()
        await asyncio.gather(*running)

    run(SchedulerConfig(), [device], body)


class Stubborn(FakeEngine):
    """Keeps its weights at the first release, as CTranslate2 does while a batch of them is
    still active."""

    def __init__(self, model_id: str) -> None:
        super().__init__(model_id=model_id)
        self.tries = 0
        self.tried = threading.Event()

    def unload(self) -> None:
        self.tries += 1
        self.tried.set()
        if self.tries > 1:
            super().unload()


def test_a_release_the_engine_could_not_do_reads_as_loaded_and_is_tried_again_later() -> None:
    a = Stubborn("a")
    device = Device.of("0", a)

    async def body(s: Scheduler, clock: ManualClock) -> None:
        await job(s, "a", 0.0)
        assert await asyncio.to_thread(a.tried.wait, 5)
        await settle()
        assert (a.tries, s.residency.loaded("a")) == (1, True)  # not again at once
        clock.advance(RETRY_RELEASE_S)
        assert await asyncio.to_thread(a.unloaded.wait, 5)
        assert not s.residency.loaded("a")

    run(SchedulerConfig(), [device], body)


def test_each_model_has_its_own_idle_time_from_its_entry_or_the_server_default() -> None:
    a, b, device = pair()
    config = SchedulerConfig(model_idle=60.0, keep_alive={"b": 10.0})

    async def body(s: Scheduler, clock: ManualClock) -> None:
        await job(s, "a", None)
        await job(s, "b", None)
        assert (s.residency.keep_alive("a"), s.residency.keep_alive("b")) == (60.0, 10.0)
        assert s.residency.release_at(device, "b") == 10.0
        clock.advance(10.0)
        assert await asyncio.to_thread(b.unloaded.wait, 5)
        assert a.loaded
        clock.advance(50.0)
        assert await asyncio.to_thread(a.unloaded.wait, 5)

    run(config, [device], body)


def test_the_latest_requests_keep_alive_wins_and_none_means_the_default_again() -> None:
    _, _, device = pair()

    async def body(s: Scheduler, clock: ManualClock) -> None:
        await job(s, "a", 300.0)
        assert s.residency.keep_alive("a") == 300.0
        clock.advance(200.0)
        await job(s, "a", 30.0)  # counted from this job's end
        assert s.residency.release_at(device, "a") == 230.0
        await job(s, "a", None)
        assert s.residency.keep_alive("a") == -1.0  # the default, forever

    run(SchedulerConfig(), [device], body)


def test_an_operator_unloads_an_idle_model_and_loads_it_again() -> None:
    a, b, device = pair()

    async def body(s: Scheduler, clock: ManualClock) -> None:
        await s.residency.unload("a")
        assert (a.loaded, s.residency.loaded("a"), b.loaded) == (False, False, True)
        a.unloaded.clear()
        await s.residency.load("a", keep_alive=20.0)
        assert (a.loaded, a.loads, s.residency.keep_alive("a")) == (True, 1, 20.0)
        clock.advance(20.0)  # its idle time counts from the load
        assert await asyncio.to_thread(a.unloaded.wait, 5)

    run(SchedulerConfig(), [device], body)


@pytest.mark.parametrize(
    ("default", "asked", "kept"),
    [
        (-1.0, 0.0, -1.0),
        (-1.0, 600.0, -1.0),
        (300.0, 0.0, 300.0),
        (300.0, 60.0, 300.0),
        (300.0, 600.0, 600.0),
        (300.0, 3600.0, 3600.0),
        (300.0, 7200.0, 3600.0),  # an hour at most
        (300.0, -1.0, 3600.0),  # never for good
        (300.0, 1e308, 3600.0),
        (7200.0, -1.0, 7200.0),  # a default past the hour stays the longest
    ],
)
def test_a_tenants_keep_alive_is_between_its_default_and_an_hour(
    default: float, asked: float, kept: float
) -> None:
    _, _, device = pair()

    async def body(s: Scheduler, clock: ManualClock) -> None:
        s.residency.begin("a")
        s.residency.end("a", asked, tenant=True)
        assert s.residency.keep_alive("a") == kept
        s.residency.begin("a")
        s.residency.end("a", asked)  # an operator's job: Ollama's rule, the latest wins
        assert s.residency.keep_alive("a") == asked

    run(SchedulerConfig(keep_alive={"a": default}), [device], body)
