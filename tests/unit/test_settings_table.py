"""The settings are written once: the flags and docs/configuration.md's tables are made from
the fields, and the groups together are the one frozen Settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from asrserve.cli.main import build_settings, parser
from asrserve.settings import GROUPS, LimitsSettings, Settings
from asrserve.settings.table import flags, main
from asrserve.tune.simulator import SimulatedService

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
# The flags `asrserve serve` had when they were a hand-kept table; none may go missing.
FLAGS_BEFORE_GROUPS = {
    "--host", "--port", "--data-dir", "--model-id", "--model-cache-dir", "--device",
    "--device-index", "--compute-type", "--cpu-threads", "--cpu-replicas", "--beam-size",
    "--encoder-window", "--encoder-windows-s", "--fallback-temperatures", "--batch-policy",
    "--max-batch-size", "--max-wait-ms", "--max-queue-age-s", "--sync-timeout-s",
    "--max-sync-upload-bytes", "--max-job-upload-bytes", "--max-audio-seconds",
    "--audio-retention-s", "--auth", "--broker", "--shared-dir", "--lease-s",
    "--metrics-port", "--log-level", "--log-format",
}  # fmt: skip


def test_the_configuration_tables_are_the_fields() -> None:
    assert main(["--check", str(CONFIGURATION)]) == 0


def test_each_setting_is_in_one_group_and_says_what_it_means() -> None:
    grouped = [name for _, group in GROUPS for name in group.model_fields]
    assert sorted(grouped) == sorted(Settings.model_fields)  # no field twice, none left out
    assert [name for name in grouped if not Settings.model_fields[name].description] == []


def test_the_serve_flags_are_made_from_the_fields() -> None:
    assert {flag.name for flag in flags()} == FLAGS_BEFORE_GROUPS | {
        "--engine",
        "--calibration",
        "--wyoming-port",
        "--wyoming-host",
        "--wyoming-zeroconf",
    }
    argv = ["serve", "--max-batch-size", "4", "--encoder-windows-s", "5,30"]
    args = parser({}).parse_args([*argv, "--shared-dir", "/mnt/x", "--cpu-threads", "auto"])
    settings = build_settings(args)
    assert (settings.max_batch_size, settings.encoder_windows_s) == (4, (5.0, 30.0))
    assert (settings.shared_dir, settings.cpu_threads) == (Path("/mnt/x"), "auto")


def test_a_group_is_a_type_the_settings_are() -> None:
    settings = Settings(max_audio_seconds=60.0)
    assert isinstance(settings, LimitsSettings) and settings.max_audio_seconds == 60.0
    with pytest.raises(ValueError, match="frozen"):
        settings.max_audio_seconds = 1.0  # type: ignore[misc]


def test_the_simulator_runs_the_service_as_its_settings_configure_it() -> None:
    """tune's simulated service takes its defaults from the settings, not copies of them."""
    defaults = Settings()
    assert SimulatedService() == SimulatedService.of(defaults, 1, defaults.windows)
    settings = Settings(offline_holdoff_ms=50.0, prefetch_jobs=4)
    tuned = SimulatedService.of(settings, 2, settings.windows)
    assert (tuned.offline_holdoff, tuned.prefetch, tuned.devices) == (0.05, 4, 2)
