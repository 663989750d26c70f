"""What the engine layer reads from a model directory without loading the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asrserve.engine.base import ModelInfo, ModelNotFoundError
from asrserve.engine.loading import MULTILINGUAL_VOCABULARY, describe
from asrserve.engine.whisper import bundled_model_path
from asrserve.settings import Settings


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
    assert bundled_model_path().is_dir()
    assert describe(Settings(beam_size=3)) == ModelInfo("tiny.en", False, 3)


@pytest.mark.parametrize("form", ["txt", "json"])
def test_a_multilingual_size_vocabulary_makes_a_multilingual_model(
    tmp_path: Path, form: str
) -> None:
    model = fake_model(tmp_path / "large-v3", MULTILINGUAL_VOCABULARY, form)
    assert describe(Settings(model=model)) == ModelInfo("large-v3", True, 5)


def test_one_token_less_is_an_english_only_model(tmp_path: Path) -> None:
    model = fake_model(tmp_path / "small.en", MULTILINGUAL_VOCABULARY - 1, "txt")
    assert describe(Settings(model=model, model_id="small")) == ModelInfo("small", False, 5)


def test_a_folder_without_weights_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"missing: model\.bin, config\.json"):
        describe(Settings(model=tmp_path))
