"""CTranslate2's ``model.bin`` read as what it is: a table of named arrays.

The file (``ctranslate2/specs/model_spec.py`` writes it) is a header (binary version, spec
name, spec revision), then each variable (name, rank, dimensions, type id, byte count,
bytes), then aliases (a name that means another variable: Whisper's output projection is
its token embeddings). Weights quantized to int8 or int16 carry a ``<name>_scale`` beside
them; :func:`read_variables` gives every weight back as floats (quantized ones divided by
their scale), so that another engine can run the same model. Numpy only: no CTranslate2.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

import numpy as np

MIN_BINARY_VERSION = 4  # the first with a type id per variable (CTranslate2 2.x on)
TYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")  # by type id
QUANTIZED = ("int8", "int16")


class Ct2FormatError(ValueError):
    """The file is not a ``model.bin`` this reader understands."""


def _unpack(handle: BinaryIO, fmt: str) -> int:
    size = struct.calcsize(fmt)
    data = handle.read(size)
    if len(data) != size:
        raise Ct2FormatError("the file ends in the middle of its table")
    value: int = struct.unpack("<" + fmt, data)[0]
    return value


def _string(handle: BinaryIO) -> str:
    length = _unpack(handle, "H")
    return handle.read(length).rstrip(b"\0").decode("utf-8")


def _array(raw: bytes, type_id: int, shape: tuple[int, ...]) -> np.ndarray:
    if type_id >= len(TYPES):
        raise Ct2FormatError(f"unknown variable type id {type_id}")
    name = TYPES[type_id]
    if name == "bfloat16":  # no numpy type: the upper half of a float32
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return halves.view(np.float32).reshape(shape)
    return np.frombuffer(raw, dtype=np.dtype(name).newbyteorder("<")).reshape(shape)


def read_raw(path: Path) -> tuple[str, int, dict[str, np.ndarray]]:
    """The spec's name, its revision, and every variable as stored (aliases resolved)."""
    with path.open("rb") as handle:
        version = _unpack(handle, "I")
        if version < MIN_BINARY_VERSION:
            raise Ct2FormatError(
                f"binary version {version} is older than this reader knows ({MIN_BINARY_VERSION})"
            )
        spec, revision = _string(handle), _unpack(handle, "I")
        variables: dict[str, np.ndarray] = {}
        for _ in range(_unpack(handle, "I")):
            name = _string(handle)
            shape = tuple(_unpack(handle, "I") for _ in range(_unpack(handle, "B")))
            type_id, size = _unpack(handle, "B"), _unpack(handle, "I")
            raw = handle.read(size)
            if len(raw) != size:
                raise Ct2FormatError(f"the file ends inside variable {name}")
            variables[name] = _array(raw, type_id, shape)
        for _ in range(_unpack(handle, "I")):
            alias, target = _string(handle), _string(handle)
            variables[alias] = variables[target]
    return spec, revision, variables


def dequantized(variables: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every variable as floats: an int8/int16 weight divided by its ``_scale`` (one per row
    for int8, reshaped back for a convolution; one for the whole weight for int16); the
    scales themselves dropped. Float arrays keep their type; scalars stay as they are."""
    out: dict[str, np.ndarray] = {}
    for name, value in variables.items():
        if name.endswith("_scale") and name[: -len("_scale")] in variables:
            continue
        scale = variables.get(name + "_scale")
        if scale is not None and value.dtype.name in QUANTIZED:
            rows = value.reshape(value.shape[0], -1).astype(np.float32)
            factor = scale.astype(np.float32).reshape(-1, 1) if scale.ndim else scale
            out[name] = (rows / factor).reshape(value.shape)
        else:
            out[name] = value
    return out


def read_variables(path: Path) -> tuple[str, dict[str, np.ndarray]]:
    """The spec's name and its variables as floats (:func:`dequantized`)."""
    spec, _, variables = read_raw(path)
    return spec, dequantized(variables)


def quantize_int8(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CTranslate2's int8 quantization of one weight: a scale per output row (127 over the
    row's largest magnitude), the weight times it, rounded. Dividing by the scale gives the
    weight back within half a step per row."""
    rows = weight.reshape(weight.shape[0], -1).astype(np.float32)
    peak = np.abs(rows).max(axis=1)
    peak[peak == 0] = 127.0
    scale = (127.0 / peak).astype(np.float32)
    quantized = np.rint(rows * scale[:, None]).astype(np.int8)
    return quantized.reshape(weight.shape), scale


def write_model(
    path: Path,
    spec: str,
    revision: int,
    variables: dict[str, np.ndarray],
    binary_version: int = 6,
    aliases: Mapping[str, str] | None = None,
) -> None:
    """A ``model.bin`` of these variables and ``aliases`` (a name -> the variable it
    means), as CTranslate2 writes one."""
    with path.open("wb") as out:

        def string(text: str) -> None:
            data = text.encode("utf-8")
            out.write(struct.pack("<H", len(data) + 1) + data + b"\0")

        out.write(struct.pack("<I", binary_version))
        string(spec)
        out.write(struct.pack("<II", revision, len(variables)))
        for name, value in variables.items():
            string(name)
            out.write(struct.pack("<B", value.ndim))
            out.write(struct.pack(f"<{value.ndim}I", *value.shape))
            data = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes()
            out.write(struct.pack("<BI", TYPES.index(value.dtype.name), len(data)))
            out.write(data)
        out.write(struct.pack("<I", len(aliases or {})))
        for alias, target in (aliases or {}).items():
            string(alias)
            string(target)
