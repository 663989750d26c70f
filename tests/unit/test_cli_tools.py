"""The tooling's commands come from entry points (cli/tools.py): installed ones resolve, and
one whose extra is missing is still listed and says what to install."""

from __future__ import annotations

import argparse
import os
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from asrserve.cli.main import main, parser
from asrserve.cli.tools import GROUP, tool_commands


def test_the_installed_tools_are_bench_and_tune() -> None:
    tools = tool_commands()
    assert sorted(tools) == ["bench", "tune"]
    assert parser(tools).parse_args(["tune", "--policies", "greedy"]).command == "tune"


def test_a_tool_without_its_extra_says_what_to_install(
    capsys: pytest.CaptureFixture[str],
) -> None:
    absent = EntryPoint(name="bench", value="asrserve_absent_tooling.cli:COMMAND", group=GROUP)
    tools = tool_commands([absent])
    assert not tools["bench"].installed
    assert parser(tools).parse_args(["bench"]).command == "bench"  # still listed
    assert tools["bench"].run(argparse.Namespace(command="bench")) == 2
    assert capsys.readouterr().err == (
        "asrserve: asrserve bench needs the bench extra (missing: asrserve_absent_tooling):"
        " pip install 'asrserve[bench]'\n"
    )


def test_main_builds_a_tools_arguments_from_its_entry_point(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--help"])
    assert exit_.value.code == 0
    assert "--policies" in capsys.readouterr().out


def test_main_answers_a_missing_tool_whatever_its_arguments(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = EntryPoint(name="bench", value="asrserve_absent_tooling.cli:COMMAND", group=GROUP)
    monkeypatch.setattr("asrserve.cli.main.tool_commands", lambda: tool_commands([absent]))
    assert main(["bench", "--policies", "greedy", "--json", "x.json"]) == 2
    assert "pip install 'asrserve[bench]'" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["serve"], ["keys", "list"]])
def test_a_bad_secret_setting_is_named_without_its_value(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Before, pydantic's message carried the value (input_value='...') to the log."""
    monkeypatch.setenv("ASRSERVE_API_KEY", "asr_short-but-secret")
    umask = os.umask(0o022)  # main sets the data dir's umask: this process's is put back
    try:
        assert main(command) == 2
    finally:
        os.umask(umask)
    err = capfd.readouterr().err
    assert err == (
        "asrserve: invalid setting: ASRSERVE_API_KEY (api_key): String should have at least"
        " 32 characters\n"
    )


def test_keys_create_keeps_the_environment_keys_names(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A key made by hand as `env` would be revoked by the next start without
    ASRSERVE_API_KEY: the name is refused, and the store stays empty."""
    umask = os.umask(0o022)
    try:
        assert main(["keys", "create", "--name", "env", "--data-dir", str(tmp_path)]) == 2
        assert "kept for the key ASRSERVE_API_KEY gives" in capfd.readouterr().err
        assert main(["keys", "list", "--data-dir", str(tmp_path)]) == 0
    finally:
        os.umask(umask)
    assert capfd.readouterr().out.count("\n") == 1  # the header alone
