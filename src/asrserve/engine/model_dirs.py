"""What a model directory holds: a CTranslate2 conversion (``model.bin``, what faster-whisper
loads) or a transformers checkpoint (``config.json`` of ``model_type`` whisper beside its
weights, what ``WhisperForConditionalGeneration`` loads). Read from the files alone."""

from __future__ import annotations

import json
from pathlib import Path

from asrserve.engine.base import ModelNotFoundError

CTRANSLATE2 = "ctranslate2"
TRANSFORMERS = "transformers"
REQUIRED_FILES = ("model.bin", "config.json")  # a CTranslate2 Whisper conversion
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
MULTILINGUAL_VOCABULARY = 51865  # Whisper's English-only models have one token less


def is_ctranslate2_dir(path: Path) -> bool:
    return path.is_dir() and all((path / name).is_file() for name in REQUIRED_FILES)


def is_transformers_dir(path: Path) -> bool:
    """A transformers Whisper checkpoint: its ``config.json`` says ``whisper`` and its
    weights lie beside it."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    weights = any((path / name).is_file() for name in WEIGHT_FILES)
    return bool(isinstance(config, dict) and config.get("model_type") == "whisper" and weights)


def model_format(path: Path) -> str:
    """:data:`CTRANSLATE2` or :data:`TRANSFORMERS`; else the error that says what is missing."""
    if is_ctranslate2_dir(path):
        return CTRANSLATE2
    if is_transformers_dir(path):
        return TRANSFORMERS
    check_model_dir(path)
    raise AssertionError("unreachable: check_model_dir raised")  # pragma: no cover


def check_model_dir(path: Path) -> Path:
    """``path``, if it is a CTranslate2 Whisper model; else what it lacks."""
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if not path.is_dir() or missing:
        raise ModelNotFoundError(
            f"model directory {path} is not a CTranslate2 Whisper model "
            f"(missing: {', '.join(missing) or 'directory'}) nor a transformers one (a"
            " config.json of model_type whisper beside model.safetensors); nothing is"
            " downloaded at run time"
        )
    return path
