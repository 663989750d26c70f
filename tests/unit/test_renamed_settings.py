"""Settings renamed so that one word names one idea still work under their old names, with
a FutureWarning, until they are removed."""

from __future__ import annotations

import pytest

from asrserve.cli.main import build_settings, parser, serves_inference
from asrserve.settings import RENAMED, Settings


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED.items()))
def test_an_old_environment_name_still_sets_the_renamed_setting(
    monkeypatch: pytest.MonkeyPatch, old: str, new: str
) -> None:
    default = Settings.model_fields[new].default
    value = 3 if default == "auto" else default + 1
    monkeypatch.setenv(f"ASRSERVE_{old.upper()}", str(value))
    with pytest.warns(FutureWarning, match=f"ASRSERVE_{old.upper()} is deprecated.*{new.upper()}"):
        settings = Settings()
    assert getattr(settings, new) == value


def test_the_new_environment_name_wins_over_the_old(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASRSERVE_CPU_WORKERS", "3")
    monkeypatch.setenv("ASRSERVE_CPU_REPLICAS", "2")
    with pytest.warns(FutureWarning, match="ASRSERVE_CPU_WORKERS"):
        assert Settings().cpu_replicas == 2


def test_an_old_argument_name_still_sets_the_renamed_setting() -> None:
    with pytest.warns(FutureWarning, match="batch_window_s is deprecated.*batch_api_window_s"):
        settings = Settings(batch_window_s=60.0)  # type: ignore[call-arg]
    assert settings.batch_api_window_s == 60.0


def test_the_old_cli_flags_still_work() -> None:
    args = parser().parse_args(["serve", "--cpu-workers", "2"])
    with pytest.warns(FutureWarning, match="--cpu-workers is deprecated.*--cpu-replicas"):
        assert build_settings(args).cpu_replicas == 2
    old = parser().parse_args(["serve", "--broker", "redis://x", "--workers"])
    with pytest.warns(FutureWarning, match="--workers is deprecated.*--inference"):
        assert serves_inference(old, build_settings(old))
