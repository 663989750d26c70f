"""``asrserve tune``: recorder, latency fit, discrete-event simulator, CLI.

The server's recording is asked of the app in this process with a fake forward pass
(``tests/support/inprocess.py``); the CLI runs as a process of its own."""

from __future__ import annotations

import json
import logging
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from asrserve.batcher.recording import ARRIVALS, BATCHES, TrafficRecorder, read_rows
from asrserve.batcher.stats import BatchRecord
from asrserve.bench.corpus import Clip
from asrserve.jobs.models import Job
from asrserve.settings import Settings
from asrserve.tune.chunks import chunk_durations, window_frames
from asrserve.tune.cli import recommend
from asrserve.tune.model import LatencyModel, curves, describe_curves, fit, fit_overhead
from asrserve.tune.simulator import Request, Setting, SimulatedService, simulate
from asrserve.vocabulary import Priority, TranscriptionOptions
from tests.support.inprocess import in_process

MODEL = LatencyModel(a=0.05, b=0.02, c=0.1, whole_b=0.04, whole_c=0.05)
ZERO = LatencyModel(0.0, 0.0, 0.0, 0.0, 0.0)


def poisson(
    rate: float, count: int, seed: int = 0, lo: float = 2.0, hi: float = 30.0
) -> list[Request]:
    rng = random.Random(seed)
    now, out = 0.0, []
    for _ in range(count):
        now += rng.expovariate(rate)
        out.append(Request(now, rng.uniform(lo, hi)))
    return out


# --- simulator ----------------------------------------------------------------------


def test_zero_latency_devices_complete_everything_at_once() -> None:
    requests = poisson(50.0, 500, lo=2.0, hi=90.0)
    for setting in (Setting("greedy", 8), Setting("none")):
        outcome = simulate(requests, setting, ZERO)
        assert outcome.latencies == [0.0] * len(requests)
    window = simulate(requests, Setting("window", 8, 20.0), ZERO)
    assert max(window.latencies) <= 0.02 + 1e-9


def test_greedy_dispatches_a_lone_request_at_once() -> None:
    requests = [Request(10.0 * i, 12.0) for i in range(5)]  # far apart: the device is idle
    outcome = simulate(requests, Setting("greedy", 16), MODEL)
    assert outcome.percentile(50) == pytest.approx(MODEL.batch(1, 12.0))
    assert outcome.mean_batch == 1.0


def test_window_waits_max_wait_for_a_lone_request() -> None:
    requests = [Request(10.0 * i, 12.0) for i in range(5)]
    outcome = simulate(requests, Setting("window", 16, 50.0), MODEL)
    assert outcome.percentile(50) == pytest.approx(0.05 + MODEL.batch(1, 12.0))
    # A full batch does not wait: 4 simultaneous arrivals with max_batch_size 4.
    burst = simulate([Request(0.0, 12.0)] * 4, Setting("window", 4, 50.0), MODEL)
    assert burst.latencies == [pytest.approx(MODEL.batch(4, 48.0))] * 4


def test_larger_batches_under_load() -> None:
    requests = poisson(2.5, 400, seed=3, lo=11.0, hi=14.0)  # one window bucket, loaded
    small = simulate(requests, Setting("greedy", 2), MODEL)
    large = simulate(requests, Setting("greedy", 16), MODEL)
    assert large.mean_batch > small.mean_batch > 1.0
    assert large.percentile(50) < small.percentile(50)


def test_devices_run_in_parallel_and_none_uses_the_whole_file_model() -> None:
    requests = [Request(0.0, 20.0), Request(0.0, 20.0)]
    one = simulate(requests, Setting("none"), MODEL, SimulatedService(devices=1))
    two = simulate(requests, Setting("none"), MODEL, SimulatedService(devices=2))
    assert sorted(one.latencies) == pytest.approx([MODEL.whole(20.0), 2 * MODEL.whole(20.0)])
    assert two.latencies == pytest.approx([MODEL.whole(20.0)] * 2)


def test_only_prefetch_jobs_are_in_flight() -> None:
    burst = [Request(0.0, 12.0)] * 4
    together = simulate(burst, Setting("window", 4, 50.0), MODEL)
    assert together.mean_batch == 4.0
    two_by_two = simulate(burst, Setting("window", 4, 50.0), MODEL, SimulatedService(prefetch=2))
    assert two_by_two.mean_batch == 2.0  # only two jobs claimed: the window times out
    first = 0.05 + MODEL.batch(2, 24.0)
    assert two_by_two.latencies == pytest.approx([first, first, 2 * first, 2 * first])


def test_offline_work_waits_out_the_holdoff_after_online_work() -> None:
    requests = [Request(0.0, 12.0), Request(0.05, 12.0, Priority.OFFLINE)]
    outcome = simulate(
        requests, Setting("greedy", 16), MODEL, SimulatedService(offline_holdoff=0.2)
    )
    online = MODEL.batch(1, 12.0)  # the offline request arrives while this runs
    offline = online + 0.2 + MODEL.batch(1, 12.0) - 0.05
    assert outcome.latencies == pytest.approx([online, offline])


def test_aged_offline_work_neither_heads_nor_rides_in_an_online_batch() -> None:
    requests = [
        Request(0.0, 30.0),  # keeps the device busy past the offline request's max_age
        Request(0.01, 12.0, Priority.OFFLINE),
        Request(0.02, 12.0),
    ]
    service = SimulatedService(max_age=0.5, offline_holdoff=0.0)
    outcome = simulate(requests, Setting("greedy", 16), MODEL, service)
    online_end = MODEL.batch(1, 30.0) + MODEL.batch(1, 12.0)
    assert outcome.latencies[2] == pytest.approx(online_end - 0.02)


def test_simulation_is_deterministic_and_counts_chunks() -> None:
    requests = poisson(1.0, 300, seed=5, lo=2.0, hi=100.0)
    first = simulate(requests, Setting("window", 8, 20.0), MODEL)
    again = simulate(requests, Setting("window", 8, 20.0), MODEL)
    assert first == again
    chunks = sum(len(chunk_durations(r.duration)) for r in requests)
    assert round(first.mean_batch * first.batches) == chunks
    assert first.throughput == pytest.approx(
        sum(r.duration for r in requests)
        / (
            max(r.arrival + lat for r, lat in zip(requests, first.latencies, strict=True))
            - requests[0].arrival
        )
    )


def test_chunks_and_windows_match_the_service() -> None:
    from asrserve.audio.features import window_frames as service_window_frames

    assert chunk_durations(2.0) == [2.0] and chunk_durations(30.0) == [30.0]
    assert chunk_durations(75.0) == [30.0, 30.0, 15.0]
    windows = (5.0, 10.0, 15.0, 20.0, 30.0)
    for duration in (1.0, 4.5, 4.6, 9.5, 14.0, 19.6, 25.0, 30.0):
        assert window_frames(duration, windows) == service_window_frames(duration, windows)


def test_an_overloaded_backlog_is_simulated_to_the_end() -> None:
    """(How fast the simulator is, is the bench's to measure, not a test's.)"""
    requests = poisson(2.0, 3000, seed=2, lo=2.0, hi=60.0)  # overloaded: a long backlog
    outcome = simulate(requests, Setting("greedy", 8), MODEL)
    assert len(outcome.latencies) == 3000
    assert all(0 < latency < math.inf for latency in outcome.latencies)
    # the backlog grows: the last arrivals wait longer than the first
    assert sum(outcome.latencies[-100:]) > sum(outcome.latencies[:100])


# --- latency model --------------------------------------------------------------------


def batch_rows(model: LatencyModel, count: int, seed: int = 0) -> list[dict[str, float]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        size = rng.randint(1, 16)
        audio = sum(rng.uniform(2, 28) for _ in range(size))
        noise = rng.gauss(0, 0.001)
        rows.append(
            {"size": size, "audio_seconds": audio, "compute": model.batch(size, audio) + noise}
        )
    return rows


def test_fit_recovers_known_coefficients() -> None:
    fitted = fit(batch_rows(MODEL, 300))
    assert fitted.a == pytest.approx(0.05, abs=2e-3)
    assert fitted.b == pytest.approx(0.02, abs=2e-4)
    assert fitted.c == pytest.approx(0.1, abs=5e-3)
    assert fitted.e == pytest.approx(0.0, abs=5e-4)
    with_e = LatencyModel(0.0, 0.025, 0.0, 0.0, 0.0, e=0.02)
    refit = fit(batch_rows(with_e, 300))
    assert refit.b == pytest.approx(0.025, abs=5e-4)
    assert refit.e == pytest.approx(0.02, abs=2e-3)
    # Never a negative coefficient, even where plain least squares would give one.
    cheaper = [{"size": n, "audio_seconds": 10.0 * n, "compute": 1.0 - 0.01 * n} for n in (1, 2, 4)]
    clamped = fit(cheaper)
    assert min(clamped.a, clamped.b, clamped.c, clamped.e) >= 0.0
    # The ``none`` model comes from the size-1 batches.
    singles = [{"size": 1, "audio_seconds": s, "compute": 0.04 * s + 0.05} for s in (3, 9, 20, 27)]
    whole = fit([row for row in batch_rows(MODEL, 50) if row["size"] > 1] + singles)
    assert whole.whole_batches == 4
    assert [whole.whole_b, whole.whole_c] == pytest.approx([0.04, 0.05])
    with pytest.raises(ValueError):
        fit(batch_rows(MODEL, 2))


def test_overhead_is_the_arrival_to_enqueue_delay() -> None:
    arrivals = [{"mono": 100.0 + 10 * i, "duration": 5.0 * (i + 1)} for i in range(5)]
    # Each job's chunk enters the scheduler 20 ms + 4 ms per audio second after arrival;
    # a later arrival of another length lies in between and must not be paired.
    arrivals += [{"mono": 100.01 + 10 * i, "duration": 99.0} for i in range(5)]
    batches = [
        {"size": 1, "audio_seconds": 5.0 * (i + 1), "started": 100.5 + 10 * i, "waits": [0.0]}
        for i in range(5)
    ]
    for i, row in enumerate(batches):
        row["waits"] = [0.5 - (0.02 + 0.004 * 5.0 * (i + 1))]
    o0, o1 = fit_overhead(arrivals, batches)
    assert [o0, o1] == pytest.approx([0.02, 0.004])
    assert fit_overhead([], batches) == (0.0, 0.0)


# --- recorder -------------------------------------------------------------------------


def job(index: int) -> Job:
    return Job(
        id=f"job{index}",
        priority=Priority.INTERACTIVE,
        options=TranscriptionOptions(),
        audio_duration=float(index),
    )


def test_recorder_rotates_and_stays_bounded(tmp_path: Path) -> None:
    recorder = TrafficRecorder(tmp_path / "rec", max_lines=3)
    for index in range(8):
        recorder.arrival(job(index))
    current = (tmp_path / "rec" / ARRIVALS).read_text().splitlines()
    rotated = (tmp_path / "rec" / (ARRIVALS + ".1")).read_text().splitlines()
    assert (len(rotated), len(current)) == (3, 2)
    rows = read_rows(tmp_path / "rec" / ARRIVALS)
    assert [row["job"] for row in rows] == [f"job{i}" for i in range(3, 8)]
    assert rows[0]["priority"] == 0 and rows[0]["duration"] == 3.0 and "mono" in rows[0]
    again = TrafficRecorder(tmp_path / "rec", max_lines=3)  # a restart counts what is there
    again.arrival(job(8))
    again.arrival(job(9))
    assert len((tmp_path / "rec" / ARRIVALS).read_text().splitlines()) == 1


def test_recorder_writes_batches_and_follows_settings(tmp_path: Path) -> None:
    recorder = TrafficRecorder.from_settings(Settings(data_dir=tmp_path))
    assert recorder is not None
    record = BatchRecord("cpu:0", 2, 1.0, 1.5, [0.1, 0.2], 20.0, 700, 2000)
    recorder.batch(record)
    (row,) = read_rows(tmp_path / "recordings" / BATCHES)
    assert row["size"] == 2 and row["compute"] == 0.5 and row["window_frames"] == 1000
    assert row["audio_seconds"] == 20.0 and row["waits"] == [0.1, 0.2]
    assert TrafficRecorder.from_settings(Settings(data_dir=tmp_path, record_traffic=False)) is None


def test_recorder_survives_an_unwritable_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder it cannot write to stops the recording with one warning, never an error."""
    recorder = TrafficRecorder(tmp_path / "rec")
    (tmp_path / "rec").rmdir()
    (tmp_path / "rec").write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="asrserve.batcher.recording"):
        recorder.arrival(job(1))
        recorder.arrival(job(2))
    stopped = f"traffic recording stopped: cannot write {tmp_path / 'rec' / ARRIVALS}"
    assert [record.getMessage() for record in caplog.records] == [stopped]
    assert caplog.records[0].exc_info is not None
    assert isinstance(caplog.records[0].exc_info[1], NotADirectoryError)


def test_server_records_arrivals_and_batches(corpus: list[Clip], tmp_path: Path) -> None:
    """The app in this process, a fake forward pass (``tests/support/inprocess.py``): what
    its scheduler records does not depend on the model."""
    data = tmp_path / "data"
    clips = [c for c in corpus if c.duration <= 10][:2]
    with in_process(data, {"ASRSERVE_RECORD_MAX_LINES": "1"}) as app:
        for clip in clips:
            response = app.client.post(
                "/v1/audio/transcriptions",
                data={"model": "whisper-1"},
                files={"file": (clip.path.name, clip.path.read_bytes())},
            )
            assert response.status_code == 200
    folder = data / "recordings"
    arrivals, batches = read_rows(folder / ARRIVALS), read_rows(folder / BATCHES)
    assert [row["duration"] for row in arrivals] == [
        pytest.approx(clip.duration, abs=0.1) for clip in clips
    ]
    assert len((folder / ARRIVALS).read_text().splitlines()) == 1  # rotated at one line
    assert [row["size"] for row in batches] == [1, 1] and batches[-1]["compute"] > 0
    assert batches[-1]["started"] > arrivals[-1]["mono"]  # one clock: the scheduler's


# --- CLI ------------------------------------------------------------------------------


def write_recording(data_dir: Path) -> None:
    folder = data_dir / "recordings"
    folder.mkdir(parents=True)
    rng = random.Random(4)
    arrivals = [
        {"t": 1000.0 + i, "mono": 50.0 + i, "duration": rng.uniform(2, 28), "priority": 0}
        for i in range(60)
    ]
    (folder / ARRIVALS).write_text("".join(json.dumps(row) + "\n" for row in arrivals))
    rows = batch_rows(MODEL, 80, seed=4)
    (folder / BATCHES).write_text("".join(json.dumps(row) + "\n" for row in rows))


def run_tune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asrserve.cli", "tune", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_tables_recommends_and_plots(tmp_path: Path) -> None:
    write_recording(tmp_path / "data")
    plot = tmp_path / "tune.html"
    common = ["--data-dir", str(tmp_path / "data"), "--rate", "2", "--requests", "200"]
    grid = ["--policies", "greedy,window,none", "--max-batch-size", "4,16", "--max-wait-ms", "0,50"]
    result = run_tune(*common, *grid, "--p99-target-ms", "20000", "--plot", str(plot))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "| setting | audio s / wall s | p50 s | p99 s | mean batch |" in out
    for label in ("greedy batch 4", "greedy batch 16", "window batch 16 wait 50 ms", "none"):
        assert f"| {label} |" in out
    assert "batch latency = 50.0 ms × chunks" in out
    # the recording and the simulator are deterministic: one setting comes out best
    assert "recommendation: greedy batch 4 with p99 ≤ 20000 ms:" in out
    page = plot.read_text()
    assert (
        page.startswith("<!DOCTYPE html>")
        and "<svg" in page
        and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    assert page.count("<tr>") + page.count('<tr class="best">') == 8  # header + 7 settings
    assert "greedy batch 16" in page and "(recommended)" in page and "p99 target 20 s" in page
    assert 1 <= page.count("<circle") <= 7  # settings on the same spot share a point

    strict = run_tune(*common, "--p99-target-ms", "1")
    assert strict.returncode == 0
    assert "recommendation: no setting meets p99 ≤ 1 ms; the lowest p99 is" in strict.stdout

    replay = run_tune("--data-dir", str(tmp_path / "data"), "--policies", "greedy")
    assert replay.returncode == 0 and "replay of the recording, 60 requests" in replay.stdout

    empty = run_tune("--data-dir", str(tmp_path / "nothing"))
    assert empty.returncode == 2 and "need at least 3 recorded batches" in empty.stderr


def test_recommendation_prefers_lower_p99_among_equal_throughputs() -> None:
    requests = [Request(10.0 * i, 12.0) for i in range(5)]
    outcomes = [
        simulate(requests, Setting("window", 16, 100.0), MODEL),
        simulate(requests, Setting("greedy", 16), MODEL),
    ]
    best = recommend(outcomes, None)
    assert best is not None and best.setting.policy == "greedy"
    assert recommend(outcomes, 1.0) is None


def test_tune_shows_the_cost_curves_a_recording_teaches() -> None:
    # 5 s windows: a batch of 2 takes 1.2× a batch of 1 for twice the audio
    rows = [
        {"size": size, "audio_seconds": 4.0 * size, "compute": cost, "window_frames": 500}
        for size, cost in [(1, 0.1), (2, 0.12)] * 4
    ]
    learned = describe_curves(curves(rows, limit=16))
    assert learned == ["curve 5 s windows: pays 2; 1: 40.0 (4 batches), 2: 66.67 (4 batches)"]
