"""Where a served model comes from: what a user names, turned into a model directory.

A name is tried, in order, as an existing directory; as a model an installed Python package
ships (``tiny.en``, ``base``: see :mod:`asrserve.engine.packaged`); as a faster-whisper size
name (``large-v3``) or a Hugging Face repo id (``org/name``), fetched through
``huggingface_hub`` into the model cache. A directory is a CTranslate2 conversion or a
transformers checkpoint (:mod:`asrserve.engine.model_dirs`); which engine can run which is
the engine's to say. Every failure is a :class:`ModelNotFoundError`
that says what to install or how to allow the download: the CLI raises it at start-up,
before the port is bound.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from asrserve.engine.base import ModelNotFoundError
from asrserve.engine.model_dirs import CTRANSLATE2, REQUIRED_FILES, model_format
from asrserve.engine.packaged import PACKAGED, Locate, PackageMissing, package_dir
from asrserve.settings.engine import EngineSettings
from asrserve.settings.keep_alive import model_spec

# faster-whisper's own names (faster_whisper.utils._MODELS), so users type what they know.
SYSTRAN = "Systran/faster-whisper-"
DISTIL = "Systran/faster-distil-whisper-"
TURBO = "mobiuslabsgmbh/faster-whisper-large-v3-turbo"
SIZES = ("tiny", "base", "small", "medium")
HUB_NAMES: dict[str, str] = {
    **{size: SYSTRAN + size for size in SIZES},
    **{f"{size}.en": SYSTRAN + f"{size}.en" for size in SIZES},
    **{f"large-v{n}": SYSTRAN + f"large-v{n}" for n in (1, 2, 3)},
    "large": SYSTRAN + "large-v3",
    **{
        f"distil-{size}": DISTIL + size
        for size in ("small.en", "medium.en", "large-v2", "large-v3")
    },
    "distil-large-v3.5": "distil-whisper/distil-large-v3.5-ct2",
    "large-v3-turbo": TURBO,
    "turbo": TURBO,
}
HUB_FILES = [
    "config.json",
    "model.bin",
    "tokenizer.json",
    "vocabulary.*",
    "preprocessor_config.json",
    # a transformers checkpoint (openai/whisper-*): its safetensors weights, not its others
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "model-*.safetensors",
]
REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


@dataclass(frozen=True)
class ModelSource:
    name: str  # as configured
    id: str  # what it is served as
    path: Path  # a Whisper model directory
    origin: str  # "directory", "package" or "hub"
    keep_alive: float | None = None  # its own default keep_alive (s; -1 forever), if named
    format: str = CTRANSLATE2  # what the directory holds (model_dirs: ctranslate2, transformers)


def resolve_models(settings: EngineSettings, model_cache: Path) -> list[ModelSource]:
    """Every configured model, in order (the first is the default), checked to be there;
    packaged and hub models are joined or downloaded under ``model_cache``
    (``Settings.model_cache``)."""
    sources = []
    for entry in settings.models:  # NAME, or NAME:keep_alive=VALUE
        name, keep_alive = model_spec(entry)
        source = resolve(name, cache_dir=model_cache, offline=settings.offline)
        sources.append(replace(source, keep_alive=keep_alive))
    if settings.model_id and len(sources) == 1:
        sources = [replace(sources[0], id=settings.model_id)]
    for served, count in Counter(source.id for source in sources).items():
        if count > 1:
            names = ", ".join(source.name for source in sources if source.id == served)
            raise ModelNotFoundError(
                f"models {names} would all be served as {served!r}: name each model once"
                " (two directories need different names)"
            )
    return sources


def resolve(
    name: str, *, cache_dir: Path, offline: bool, locate: Locate = package_dir
) -> ModelSource:
    """One model by name; ``locate`` finds installed packages (tests point it elsewhere)."""
    path = Path(name).expanduser()
    if path.exists():
        form = model_format(path)
        return ModelSource(name, path.resolve().name, path, "directory", format=form)
    missing: PackageMissing | None = None
    packaged = PACKAGED.get(name)
    if packaged is not None:
        try:
            return ModelSource(name, name, packaged.install(cache_dir, locate), "package")
        except PackageMissing as exc:
            missing = exc
    repo = HUB_NAMES.get(name) or (name if REPO_ID.fullmatch(name) else None)
    if repo is None:
        raise ModelNotFoundError(
            f"model {name!r} is not a CTranslate2 Whisper model directory (there is none at"
            f" {path}), a packaged model ({', '.join(PACKAGED)}), a faster-whisper size name"
            " such as small or large-v3, or a Hugging Face repo id (org/name): docs/models.md"
        )
    folder = download(name, repo, cache_dir, offline, missing)
    return ModelSource(name, name, folder, "hub", format=model_format(folder))


def download(
    name: str, repo: str, cache_dir: Path, offline: bool, missing: PackageMissing | None
) -> Path:
    """The repo's snapshot in the hub cache under ``cache_dir``, fetched unless offline."""
    import huggingface_hub

    offline = offline or hub_offline()
    try:
        folder = huggingface_hub.snapshot_download(
            repo, cache_dir=cache_dir, allow_patterns=HUB_FILES, local_files_only=offline
        )
    except (OSError, ValueError) as exc:
        install = f"; or install it: {missing} (make run MODELS={name})" if missing else ""
        if offline:
            reason = (
                f"is not in the model cache {cache_dir} and downloads are off (--offline,"
                " ASRSERVE_OFFLINE or HF_HUB_OFFLINE): run once without them to download it"
            )
        else:
            reason = f"could not be downloaded from the Hugging Face Hub ({exc})"
        raise ModelNotFoundError(
            f"model {name!r} ({repo}) {reason}{install}; or pass a CTranslate2 Whisper directory"
        ) from exc
    try:
        model_format(Path(folder))
    except ModelNotFoundError:
        missing_files = [f for f in REQUIRED_FILES if not (Path(folder) / f).is_file()]
        raise ModelNotFoundError(
            f"{repo} is not a CTranslate2 Whisper model (it has no {', '.join(missing_files)})"
            " nor a transformers one: name a faster-whisper conversion, such as"
            " Systran/faster-whisper-small, or a transformers Whisper repo"
        ) from None
    return Path(folder)


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` as huggingface_hub reads it (1, on, yes, true)."""
    return os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}
