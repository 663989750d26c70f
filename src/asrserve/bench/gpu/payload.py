"""A folder of files cut into stages of at most a budget of bytes, and put together again.

``write_stages`` lays the payload's files end to end and cuts them into stages (a file
larger than what is left of a stage goes on in the next one), each stage a folder of its
pieces and the manifest. ``take_in`` writes one stage's pieces into the home folder on the
other machine. It refuses a stage whose predecessors are not there, naming the stage to
start again from: a machine given back between two calls comes back without its disk.
After the last stage every file is checked against its size and hash.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
PACK = "pack.json"  # home: the manifest of the pack whose stages are coming in
TAKEN = "taken"  # home/taken/<n>: stage n is in
PAYLOAD = "payload"  # home/payload: the files, as they were packed
READY = "ready.json"  # home: every stage is in and the wheels are unpacked
BLOCK = 1 << 20


class StageMissing(RuntimeError):
    """A stage came before the ones it follows, or the run before the last stage."""


@dataclass(frozen=True)
class Piece:
    file: str  # its path in the payload
    offset: int
    size: int


@dataclass(frozen=True)
class Manifest:
    pack_id: str
    budget: int  # bytes a stage holds at most
    files: dict[str, dict[str, Any]]  # path -> {"size", "sha256"}
    stages: list[list[Piece]]
    facts: dict[str, Any]  # what the packer says of the pack, for the record

    def stage_bytes(self) -> list[int]:
        return [sum(piece.size for piece in stage) for stage in self.stages]

    def as_dict(self) -> dict[str, Any]:
        stages = [[asdict(piece) for piece in stage] for stage in self.stages]
        head = {"pack_id": self.pack_id, "budget": self.budget, "facts": self.facts}
        return head | {"files": self.files, "stages": stages}

    @classmethod
    def read(cls, path: Path) -> Manifest:
        body = json.loads(path.read_text(encoding="utf-8"))
        stages = [[Piece(**piece) for piece in stage] for stage in body["stages"]]
        return cls(body["pack_id"], body["budget"], body["files"], stages, body["facts"])


def plan(sizes: list[tuple[str, int]], budget: int) -> list[list[Piece]]:
    """The files (path, size), in order, cut into stages of at most ``budget`` bytes."""
    stages: list[list[Piece]] = [[]]
    room = budget
    for name, size in sizes:
        offset = 0
        while True:
            if room == 0:
                stages.append([])
                room = budget
            take = min(size - offset, room)
            stages[-1].append(Piece(name, offset, take))
            offset, room = offset + take, room - take
            if offset >= size:
                break
    return stages


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def write_stages(
    payload: Path, out: Path, budget: int, facts: dict[str, Any] | None = None
) -> Manifest:
    """``out/stage-<n>`` for each stage of the files under ``payload``, each of at most
    ``budget`` bytes; ``facts`` go into the manifest as they are."""
    paths = sorted(p for p in payload.rglob("*") if p.is_file())
    files: dict[str, dict[str, Any]] = {
        p.relative_to(payload).as_posix(): {"size": p.stat().st_size, "sha256": sha256(p)}
        for p in paths
    }
    pack_id = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
    stages = plan([(name, info["size"]) for name, info in files.items()], budget)
    manifest = Manifest(pack_id, budget, files, stages, facts or {})
    for old in out.glob("stage-*"):
        shutil.rmtree(old)
    for number, stage in enumerate(stages, 1):
        folder = out / f"stage-{number}"
        folder.mkdir(parents=True)
        for index, piece in enumerate(stage):
            with (payload / piece.file).open("rb") as source:
                source.seek(piece.offset)
                (folder / f"{index:04d}.part").write_bytes(source.read(piece.size))
        body = manifest.as_dict() | {"stage": number}
        (folder / MANIFEST).write_text(json.dumps(body, indent=1), encoding="utf-8")
    return manifest


def first_missing(home: Path, manifest: Manifest, before: int) -> int | None:
    """The first stage under ``before`` that ``home`` has not taken in (None: all are in)."""
    try:
        known = json.loads((home / PACK).read_text(encoding="utf-8"))["pack_id"]
    except (OSError, ValueError, KeyError):
        known = None
    if known != manifest.pack_id:
        return 1 if before > 1 else None
    return next((n for n in range(1, before) if not (home / TAKEN / str(n)).exists()), None)


def start_again(number: int, missing: int) -> StageMissing:
    return StageMissing(
        f"stage {number}: stage {missing} of this pack is not on this machine (given back"
        f" and started afresh since?): start again from stage {missing}"
    )


def take_in(stage_dir: Path, home: Path) -> tuple[Manifest, int]:
    """Write one stage's pieces into ``home``: the manifest and the stage's number."""
    body = json.loads((stage_dir / MANIFEST).read_text(encoding="utf-8"))
    manifest, number = Manifest.read(stage_dir / MANIFEST), int(body["stage"])
    missing = first_missing(home, manifest, number)
    if missing is not None:
        raise start_again(number, missing)
    if number == 1:
        for name in (PAYLOAD, TAKEN):
            shutil.rmtree(home / name, ignore_errors=True)
        (home / READY).unlink(missing_ok=True)
        home.mkdir(parents=True, exist_ok=True)
        (home / PACK).write_text(json.dumps(manifest.as_dict()), encoding="utf-8")
    for index, piece in enumerate(manifest.stages[number - 1]):
        data = (stage_dir / f"{index:04d}.part").read_bytes()
        if len(data) != piece.size:
            raise StageMissing(f"stage {number}: piece {index} of {piece.file} is cut short")
        target = home / PAYLOAD / piece.file
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("r+b" if target.exists() else "wb") as handle:
            handle.seek(piece.offset)
            handle.write(data)
    (home / TAKEN).mkdir(exist_ok=True)
    (home / TAKEN / str(number)).touch()
    if number == len(manifest.stages):
        verify(home / PAYLOAD, manifest)
    return manifest, number


def verify(payload: Path, manifest: Manifest) -> None:
    """Every file of the pack whole: its size and hash as packed."""
    for name, info in manifest.files.items():
        path = payload / name
        whole = path.is_file() and path.stat().st_size == info["size"]
        if not whole or sha256(path) != info["sha256"]:
            raise StageMissing(f"{name} did not arrive whole: start again from stage 1")


def check_ready(home: Path) -> None:
    """Nothing, once ``home`` holds every stage of its pack, installed; else
    :class:`StageMissing` naming the stage to start again from."""
    if (home / READY).is_file():
        return
    try:
        total = len(Manifest.read(home / PACK).stages)
    except (OSError, ValueError, KeyError):
        raise StageMissing(f"no stage of a pack is in {home}: start from stage 1") from None
    missing = next((n for n in range(1, total + 1) if not (home / TAKEN / str(n)).exists()), total)
    raise StageMissing(f"stage {missing} of {total} is not in {home}: start again from it")
