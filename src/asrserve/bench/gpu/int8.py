"""A CTranslate2 Whisper model made small enough to carry: its weights as int8.

Every weight CTranslate2 itself would quantize (a linear layer's, a convolution's, the
token embeddings: each ``.../weight`` of two dimensions or more) becomes int8 with a scale
per output row, as CTranslate2's own ``--quantization int8`` writes it
(:func:`asrserve.engine.ct2_file.quantize_int8`); the rest (norms, biases, position
encodings) stays as it was. Half the size of float16: tiny.en 37 MiB, base 71 MiB. The
file is still a CTranslate2 model, and the transformers engine's converter divides the
scales out when it meets it (``engine/pytorch/convert.py``), so the check runs int8-rounded
weights in float16 or bfloat16.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from asrserve.engine.ct2_file import quantize_int8, read_raw, write_model

KEPT = ("config.json", "tokenizer.json", "vocabulary.txt", "vocabulary.json")


def quantizable(name: str, value: np.ndarray) -> bool:
    return name.endswith("/weight") and value.ndim >= 2 and value.dtype.kind == "f"


def int8_variables(
    variables: dict[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The variables with their weights quantized, and the aliases (a name that is another
    variable, with its scale: Whisper's output projection is its token embeddings)."""
    out: dict[str, np.ndarray] = {}
    aliases: dict[str, str] = {}
    first: dict[int, str] = {}
    for name, value in variables.items():
        target = first.setdefault(id(value), name)
        if target != name:
            aliases[name] = target
            if quantizable(target, value):
                aliases[f"{name}_scale"] = f"{target}_scale"
        elif quantizable(name, value):
            out[name], out[f"{name}_scale"] = quantize_int8(value)
        else:
            out[name] = value
    return out, aliases


def pack_model(source: Path, target: Path) -> Path:
    """``source``'s model as int8 in ``target``, with the files its engines read beside it."""
    spec, revision, variables = read_raw(source / "model.bin")
    quantized, aliases = int8_variables(variables)
    target.mkdir(parents=True, exist_ok=True)
    write_model(target / "model.bin", spec, revision, quantized, aliases=aliases)
    for name in KEPT:
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)
    return target
