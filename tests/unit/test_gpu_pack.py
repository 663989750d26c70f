"""The GPU check's payload without a model: stages cut and taken in, wheels, int8 weights."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from asrserve.bench.gpu.int8 import int8_variables
from asrserve.bench.gpu.payload import (
    StageMissing,
    check_ready,
    plan,
    take_in,
    write_stages,
)
from asrserve.bench.gpu.wheels import SHIPPED, pinned, unpack
from asrserve.engine.ct2_file import dequantized, read_raw, write_model
from tests.support.servers import ROOT

sizes = st.lists(st.integers(0, 500), max_size=12)
budgets = st.integers(1, 300)


@given(sizes, budgets)
def test_no_stage_holds_more_than_the_budget(lengths: list[int], budget: int) -> None:
    stages = plan([(f"f{i}", n) for i, n in enumerate(lengths)], budget)
    assert all(sum(piece.size for piece in stage) <= budget for stage in stages)


@given(sizes, budgets)
def test_the_pieces_of_each_file_cover_it_once_in_order(lengths: list[int], budget: int) -> None:
    stages = plan([(f"f{i}", n) for i, n in enumerate(lengths)], budget)
    pieces = [piece for stage in stages for piece in stage]
    for i, length in enumerate(lengths):
        own = [(p.offset, p.size) for p in pieces if p.file == f"f{i}"]
        starts = [offset for offset, _ in own]
        assert starts == [sum(size for _, size in own[:k]) for k in range(len(own))]
        assert sum(size for _, size in own) == length


def payload(root: Path) -> Path:
    folder = root / "payload"
    (folder / "models" / "m").mkdir(parents=True)
    (folder / "models" / "m" / "model.bin").write_bytes(bytes(range(256)) * 40)
    (folder / "clips.json").write_text("[]")
    (folder / "empty").write_bytes(b"")
    return folder


def test_the_stages_taken_in_in_order_give_back_every_file(tmp_path: Path) -> None:
    source = payload(tmp_path)
    manifest = write_stages(source, tmp_path / "pack", budget=3000)
    for number in range(1, len(manifest.stages) + 1):
        take_in(tmp_path / "pack" / f"stage-{number}", tmp_path / "home")
    for name in manifest.files:
        assert (tmp_path / "home" / "payload" / name).read_bytes() == (source / name).read_bytes()


def test_a_stage_whose_predecessor_is_missing_names_the_stage_to_start_from(
    tmp_path: Path,
) -> None:
    write_stages(payload(tmp_path), tmp_path / "pack", budget=3000)
    take_in(tmp_path / "pack" / "stage-1", tmp_path / "home")
    with pytest.raises(StageMissing, match="start again from stage 2"):
        take_in(tmp_path / "pack" / "stage-3", tmp_path / "home")


def test_a_stage_on_a_fresh_machine_says_to_start_from_stage_1(tmp_path: Path) -> None:
    write_stages(payload(tmp_path), tmp_path / "pack", budget=3000)
    with pytest.raises(StageMissing, match="start again from stage 1"):
        take_in(tmp_path / "pack" / "stage-2", tmp_path / "home")


def test_the_run_before_the_last_stage_names_the_missing_one(tmp_path: Path) -> None:
    write_stages(payload(tmp_path), tmp_path / "pack", budget=3000)
    take_in(tmp_path / "pack" / "stage-1", tmp_path / "home")
    with pytest.raises(StageMissing, match="stage 2 of 4"):
        check_ready(tmp_path / "home")


def test_a_wheel_unpacks_with_its_modes_and_its_purelib_beside_the_rest(tmp_path: Path) -> None:
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        tool = zipfile.ZipInfo("demo/tool.so")
        tool.external_attr = 0o755 << 16
        archive.writestr(tool, b"\x7fELF")
        archive.writestr("demo-1.0.data/purelib/demo_extra.py", "X = 1\n")
        archive.writestr("demo-1.0.data/scripts/demo", "#!/bin/sh\n")
    unpack(wheel, tmp_path / "site")
    found = sorted(
        p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("*")
    )
    assert found == ["demo", "demo/tool.so", "demo_extra.py"]
    assert stat.S_IMODE((tmp_path / "site" / "demo" / "tool.so").stat().st_mode) == 0o755


def test_every_shipped_wheel_is_pinned_in_the_constraints() -> None:
    assert [r.partition("==")[0] for r in pinned(ROOT)] == list(SHIPPED)


def test_int8_weights_come_back_within_half_a_step_and_the_alias_with_them(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(50, 8)).astype(np.float16)
    variables = {
        "decoder/embeddings/weight": embeddings,
        "decoder/projection/weight": embeddings,  # an alias, as read_raw resolves one
        "decoder/layer_norm/gamma": np.ones(8, dtype=np.float16),
    }
    quantized, aliases = int8_variables(variables)
    write_model(tmp_path / "model.bin", "WhisperSpec", 3, quantized, aliases=aliases)
    _, _, read = read_raw(tmp_path / "model.bin")
    back = dequantized(read)
    step = np.abs(embeddings.astype(np.float32)).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(back["decoder/projection/weight"] - embeddings) <= step / 2 + 1e-6)
