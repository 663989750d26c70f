"""A transformers-format Whisper directory loaded onto one device, and what decoding needs
to know of it: its tokenizer, special tokens, languages and alignment heads.

The weights load with transformers' ``WhisperForConditionalGeneration.from_pretrained``
(SDPA attention, the device's dtype). Replicas of a model on one device share one loaded
copy (:class:`SharedModel`); the last replica to let go (idle) releases it, the first to
need it again loads it.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrserve.engine.base import ModelNotFoundError
from asrserve.engine.memory import give_back
from asrserve.engine.model_dirs import MULTILINGUAL_VOCABULARY, WEIGHT_FILES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelMeta:
    """What Whisper's decoding reads beyond the weights (``generation_config.json`` and the
    model's ``config.json``)."""

    vocabulary_size: int
    mels: int
    multilingual: bool
    languages: dict[str, int]  # code -> its language token
    suppress_begin: tuple[int, ...]  # suppressed at the first step: blank, end-of-text
    alignment_heads: tuple[tuple[int, int], ...]  # (decoder layer, head) pairs
    start_of_transcript: int
    weights_bytes: int

    @classmethod
    def read(cls, folder: Path) -> ModelMeta:
        config = _json(folder / "config.json")
        generation = _json(folder / "generation_config.json") if _has(folder, "generation") else {}
        layers, heads = int(config["decoder_layers"]), int(config["decoder_attention_heads"])
        alignment = generation.get("alignment_heads") or [
            [layer, head] for layer in range(layers // 2, layers) for head in range(heads)
        ]
        languages = {
            token.strip("<|>"): int(index)
            for token, index in (generation.get("lang_to_id") or {}).items()
        }
        size = sum(
            file.stat().st_size for name in WEIGHT_FILES if (file := folder / name).is_file()
        )
        multilingual = int(config["vocab_size"]) >= MULTILINGUAL_VOCABULARY
        start = generation.get("decoder_start_token_id") or config.get("decoder_start_token_id")
        return cls(
            vocabulary_size=int(config["vocab_size"]),
            mels=int(config.get("num_mel_bins", 80)),
            multilingual=multilingual,
            languages=languages,
            suppress_begin=tuple(generation.get("begin_suppress_tokens") or (220, 50256)),
            alignment_heads=tuple((int(a), int(b)) for a, b in alignment),
            start_of_transcript=int(start or (50258 if multilingual else 50257)),
            weights_bytes=size,
        )


def _has(folder: Path, kind: str) -> bool:
    return (folder / f"{kind}_config.json").is_file()


def _json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelNotFoundError(f"{path} cannot be read as a model's JSON ({exc})") from exc
    return data


def load(folder: Path, device: str, dtype: str) -> Any:
    """transformers' Whisper model from ``folder``, on ``device`` in ``dtype``, for inference."""
    import torch
    from transformers import WhisperForConditionalGeneration
    from transformers.utils import logging as transformers_logging

    quiet: Any = transformers_logging  # its loading bars are no log lines
    quiet.disable_progress_bar()
    whisper: Any = WhisperForConditionalGeneration
    model = whisper.from_pretrained(
        str(folder), dtype=getattr(torch, dtype), attn_implementation="sdpa"
    )
    return model.to(device).eval()


class SharedModel:
    """One loaded copy of a model on one device, shared by the replicas that run on it."""

    def __init__(self, folder: Path, device: str, dtype: str) -> None:
        self.folder, self.device, self.dtype = folder, device, dtype
        self.model: Any = None
        self._holders: set[int] = set()
        self._lock = threading.Lock()
        self._load()

    def _load(self) -> None:
        self.model = load(self.folder, self.device, self.dtype)
        log.info("loaded %s on %s (%s, transformers)", self.folder, self.device, self.dtype)

    def hold(self, holder: object) -> None:
        with self._lock:
            self._holders.add(id(holder))
            if self.model is None:
                self._load()

    def let_go(self, holder: object) -> None:
        with self._lock:
            self._holders.discard(id(holder))
            if not self._holders and self.model is not None:
                self.model = None
                _empty_device_cache(self.device)
                give_back()

    def held_by(self, holder: object) -> bool:
        return id(holder) in self._holders


def _empty_device_cache(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    elif device.startswith("mps"):
        torch.mps.empty_cache()
