"""What the engine layer reads from a model directory without loading the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asrserve.engine.base import ModelInfo, ModelNotFoundError
from asrserve.engine.catalog import Catalog
from asrserve.engine.loading import catalog
from asrserve.engine.model_dirs import MULTILINGUAL_VOCABULARY
from asrserve.engine.whisper import bundled_model_path
from asrserve.settings import Settings


def described(settings: Settings) -> Catalog:
    """The served models as the ctranslate2 engine describes them, without loading them."""
    return catalog(settings, settings.model_cache)


def fake_model(folder: Path, vocabulary: int, form: str) -> Path:
    """A model directory as CTranslate2's converter lays it out, with empty weights."""
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"")
    (folder / "config.json").write_text("{}", encoding="utf-8")
    tokens = [f"token{i}" for i in range(vocabulary)]
    if form == "txt":
        (folder / "vocabulary.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    else:
        (folder / "vocabulary.json").write_text(json.dumps(tokens), encoding="utf-8")
    return folder


def test_the_bundled_model_is_tiny_en_and_english_only() -> None:
    weights = (bundled_model_path() / "model.bin").stat().st_size
    assert described(Settings(beam_size=3)).models == (ModelInfo("tiny.en", False, 3, weights),)


def test_every_configured_model_is_served_the_first_by_default(tmp_path: Path) -> None:
    other = fake_model(tmp_path / "large-v3", MULTILINGUAL_VOCABULARY, "json")
    served = described(Settings(models=(str(other), "tiny.en")))
    assert served.ids == ["large-v3", "tiny.en"]
    assert served.default == ModelInfo("large-v3", True, 5)
    assert served.resolve("whisper-1") is served.default


@pytest.mark.parametrize("form", ["txt", "json"])
def test_a_multilingual_size_vocabulary_makes_a_multilingual_model(
    tmp_path: Path, form: str
) -> None:
    model = fake_model(tmp_path / "large-v3", MULTILINGUAL_VOCABULARY, form)
    assert described(Settings(model=model)).models == (ModelInfo("large-v3", True, 5),)


def test_one_token_less_is_an_english_only_model(tmp_path: Path) -> None:
    model = fake_model(tmp_path / "small.en", MULTILINGUAL_VOCABULARY - 1, "txt")
    served = described(Settings(model=model, model_id="small")).models
    assert served == (ModelInfo("small", False, 5),)


def test_a_folder_without_weights_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"missing: model\.bin, config\.json"):
        described(Settings(model=tmp_path))
