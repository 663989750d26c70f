"""The recordings the check transcribes, with what is said in each: copied into the
payload here (``clips/``, one ``clips.json``), read from it there."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

INDEX = "clips.json"


@dataclass(frozen=True)
class Clip:
    path: Path
    language: str
    text: str  # the reference


def write_clips(clips: list[Clip], folder: Path) -> None:
    """Each clip copied into ``folder`` as ``<language>-<n>-<name>``, and the index."""
    folder.mkdir(parents=True, exist_ok=True)
    index = []
    for number, clip in enumerate(clips):
        name = f"{clip.language}-{number:03d}-{clip.path.name}"
        shutil.copyfile(clip.path, folder / name)
        index.append(asdict(clip) | {"path": name})
    (folder / INDEX).write_text(json.dumps(index, indent=1, ensure_ascii=False), encoding="utf-8")


def read_clips(folder: Path) -> list[Clip]:
    index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
    return [Clip(folder / item["path"], item["language"], item["text"]) for item in index]
