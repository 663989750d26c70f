"""Read a PyTorch state dict (``torch.save``'s zip) into numpy arrays, without torch.

The archive holds a pickle of the dict and one raw little-endian file per storage; a tensor
is a storage, an offset, a shape and strides. Only what a state dict of plain tensors needs
is allowed to unpickle (``find_class``), and the few metadata types a training checkpoint
carries beside it (pyannote's task specification, the torch version), which unpickle as
inert records: anything else in the pickle is refused, so a file cannot run code as
``torch.load`` without ``weights_only`` would.
"""

from __future__ import annotations

import pickle
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

_DTYPES = {
    "FloatStorage": np.float32,
    "HalfStorage": np.float16,
    "DoubleStorage": np.float64,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "BoolStorage": np.bool_,
}


class StateDictError(ValueError):
    """The file is not a state dict of plain tensors."""


class _Inert:
    """A checkpoint's metadata object, kept as nothing: it takes any arguments and state."""

    def __new__(cls, *args: Any, **kwargs: Any) -> _Inert:
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass


# what a pyannote training checkpoint holds beside its weights
_METADATA = {
    ("torch.torch_version", "TorchVersion"): str,
    ("pyannote.audio.core.task", "Specifications"): _Inert,
    ("pyannote.audio.core.task", "Problem"): _Inert,
    ("pyannote.audio.core.task", "Resolution"): _Inert,
}


class _Storage:
    def __init__(self, dtype: type[np.generic]) -> None:
        self.dtype = dtype


def _rebuild(
    storage: npt.NDArray[Any],
    offset: int,
    shape: tuple[int, ...],
    stride: tuple[int, ...],
    *_: Any,
) -> npt.NDArray[Any]:
    item = storage.itemsize
    return np.lib.stride_tricks.as_strided(
        storage[offset:], shape=shape, strides=[s * item for s in stride]
    ).copy()


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: IO[bytes], archive: zipfile.ZipFile, prefix: str) -> None:
        super().__init__(file)
        self.archive, self.prefix = archive, prefix

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild
        if (module, name) == ("collections", "OrderedDict"):
            return OrderedDict
        if module == "torch" and name in _DTYPES:
            return _Storage(_DTYPES[name])
        if (module, name) in _METADATA:
            return _METADATA[module, name]
        raise StateDictError(f"a state dict does not hold {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        kind, storage, key, _location, _count = pid
        if kind != "storage" or not isinstance(storage, _Storage):
            raise StateDictError(f"unexpected persistent id {kind!r}")
        raw = self.archive.read(f"{self.prefix}/data/{key}")
        return np.frombuffer(raw, dtype=storage.dtype)


def load(path: Path, entry: str | None = None) -> dict[str, npt.NDArray[Any]]:
    """The tensors of the state dict saved at ``path`` (or under its key ``entry``, as a
    training checkpoint holds it), by name."""
    with zipfile.ZipFile(path) as archive:
        pickles = [name for name in archive.namelist() if name.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise StateDictError(f"{path.name} is not a torch.save archive")
        prefix = pickles[0].rsplit("/", 1)[0]
        with archive.open(pickles[0]) as file:
            state = _Unpickler(file, archive, prefix).load()
    if entry is not None:
        state = state.get(entry) if isinstance(state, dict) else None
    if not isinstance(state, dict):
        raise StateDictError(f"{path.name} holds no state dict")
    return {str(name): value for name, value in state.items()}
