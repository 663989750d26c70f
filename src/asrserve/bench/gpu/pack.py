"""``gpu_check.sh pack``, run here: the payload, cut into stages that each fit one call.

The payload is ``wheels/`` (what the machine lacks, :mod:`.wheels`), ``models/<id>/``
(each model as int8, :mod:`.int8`), ``clips/`` (the recordings, :mod:`.clips`) and
``models.json`` (the models' order). Each stage folder is carried by one call of the
device tool, whose limit (64 MiB) covers the repository's tree as well.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrserve.bench.gpu.clips import Clip, write_clips
from asrserve.bench.gpu.int8 import pack_model
from asrserve.bench.gpu.payload import Manifest, write_stages

CALL_LIMIT = 64 * 2**20  # bytes one call carries: the tree and the stage together
MANIFEST_ROOM = 2**20  # each stage's manifest.json, and the tree changing a little
MODELS = "models.json"
WEIGHTS = "int8, a scale per output row (CTranslate2's int8), dequantized on arrival"


@dataclass(frozen=True)
class PackConfig:
    out: Path  # the stage folders go here (``.gpu``)
    models: dict[str, Path]  # id -> its CTranslate2 directory, in order
    clips: list[Clip]
    wheels: list[Path]
    tree: int  # bytes of the repository's tree (each call carries it)
    limit: int = CALL_LIMIT

    @property
    def budget(self) -> int:
        """The bytes of payload one stage holds."""
        budget = self.limit - self.tree - MANIFEST_ROOM
        if budget <= 0:
            raise SystemExit(f"gpu check: the tree ({self.tree} B) leaves no room under the limit")
        return budget


def build_payload(config: PackConfig, payload: Path) -> None:
    shutil.rmtree(payload, ignore_errors=True)
    (payload / "wheels").mkdir(parents=True)
    for wheel in config.wheels:
        shutil.copyfile(wheel, payload / "wheels" / wheel.name)
    for model_id, source in config.models.items():
        pack_model(source, payload / "models" / model_id)
    write_clips(config.clips, payload / "clips")
    (payload / MODELS).write_text(json.dumps(list(config.models)), encoding="utf-8")


def pack(config: PackConfig) -> Manifest:
    """The stage folders ``out/stage-<n>``; the payload they were cut from is removed."""
    payload = config.out / "payload"
    build_payload(config, payload)
    facts: dict[str, Any] = {"call_limit_bytes": config.limit, "tree_bytes": config.tree}
    facts |= {"models": list(config.models), "weights": WEIGHTS, "clips": len(config.clips)}
    try:
        return write_stages(payload, config.out, config.budget, facts)
    finally:
        shutil.rmtree(payload)


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def calls(manifest: Manifest, out: str = ".gpu") -> list[str]:
    """The device tool's calls, in order: each stage's size, carry list and command."""
    lines = []
    count, tree = len(manifest.stages), manifest.facts["tree_bytes"]
    for number, size in enumerate(manifest.stage_bytes(), 1):
        command = f"bash scripts/gpu_check.sh stage {number}"
        if number == count:
            command += " && bash scripts/gpu_check.sh run"
        lines.append(
            f"call {number} of {count}: {mib(size)} + tree {mib(tree)} = {mib(size + tree)}\n"
            f'  carry: ["{out}/stage-{number}"]\n  command: {command}'
        )
    return lines
