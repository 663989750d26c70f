"""A CTranslate2 Whisper model, converted once into transformers' layout.

The packaged tiny.en and base, and every faster-whisper conversion on the hub, are
CTranslate2 ``model.bin`` files. This turns one into a transformers-format directory
(``config.json``, ``generation_config.json``, ``model.safetensors``, ``tokenizer.json``)
that ``WhisperForConditionalGeneration`` loads: variables renamed, the fused attention
projections split (self-attention's ``linear_0`` is q, k and v; cross-attention's
``linear_1`` is k and v; Whisper's k projection has no bias, CTranslate2 stores zeros), and
int8/int16 weights divided by their scales. Numpy and safetensors only: no torch.

The result is cached under the model cache and reused while the source is unchanged (its
size and modification time, stamped when it was written).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from asrserve.engine.base import ModelNotFoundError
from asrserve.engine.ct2_file import Ct2FormatError, read_variables

STAMP = "converted-from.json"
WEIGHTS = "model.safetensors"

# (CTranslate2 scope, transformers module) for the parts both decoder and encoder layers have
_NORMS = {"self_attention": "self_attn_layer_norm", "ffn": "final_layer_norm"}
_FFN = {"ffn/linear_0": "fc1", "ffn/linear_1": "fc2"}


def _pairs(prefix: str, target: str) -> dict[str, str]:
    return {f"{prefix}/weight": f"{target}.weight", f"{prefix}/bias": f"{target}.bias"}


def _norm(prefix: str, target: str) -> dict[str, str]:
    return {f"{prefix}/gamma": f"{target}.weight", f"{prefix}/beta": f"{target}.bias"}


def _split(weight: np.ndarray, parts: int) -> list[np.ndarray]:
    return list(np.split(weight, parts, axis=0))


def _attention(
    v: dict[str, np.ndarray], source: str, target: str, fused: list[str], rest: dict[str, str]
) -> Iterator[tuple[str, np.ndarray]]:
    """One attention block: the fused projection ``fused`` names (in order) split apart."""
    fused_scope = "linear_0" if fused[0] == "q_proj" else "linear_1"
    weights = _split(v[f"{source}/{fused_scope}/weight"], len(fused))
    biases = _split(v[f"{source}/{fused_scope}/bias"], len(fused))
    for name, weight, bias in zip(fused, weights, biases, strict=True):
        yield f"{target}.{name}.weight", weight
        if name != "k_proj":
            yield f"{target}.{name}.bias", bias
    for scope, name in rest.items():
        yield f"{target}.{name}.weight", v[f"{source}/{scope}/weight"]
        yield f"{target}.{name}.bias", v[f"{source}/{scope}/bias"]


def _layer(v: dict[str, np.ndarray], side: str, index: int) -> Iterator[tuple[str, np.ndarray]]:
    source, target = f"{side}/layer_{index}", f"model.{side}.layers.{index}"
    yield from _attention(
        v, f"{source}/self_attention", f"{target}.self_attn", ["q_proj", "k_proj", "v_proj"],
        {"linear_1": "out_proj"},
    )  # fmt: skip
    if side == "decoder":
        yield from _attention(
            v, f"{source}/attention", f"{target}.encoder_attn", ["k_proj", "v_proj"],
            {"linear_0": "q_proj", "linear_2": "out_proj"},
        )  # fmt: skip
        norms = {**_NORMS, "attention": "encoder_attn_layer_norm"}
    else:
        norms = _NORMS
    for scope, name in norms.items():
        for key, out in _norm(f"{source}/{scope}/layer_norm", f"{target}.{name}").items():
            yield out, v[key]
    for scope, name in _FFN.items():
        for key, out in _pairs(f"{source}/{scope}", f"{target}.{name}").items():
            yield out, v[key]


def _count_layers(v: dict[str, np.ndarray], side: str) -> int:
    return sum(1 for i in range(1000) if f"{side}/layer_{i}/ffn/linear_0/weight" in v)


def state_dict(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """transformers' names for a CTranslate2 Whisper model's variables."""
    out: dict[str, np.ndarray] = {}
    renamed = {
        **_pairs("encoder/conv1", "model.encoder.conv1"),
        **_pairs("encoder/conv2", "model.encoder.conv2"),
        "encoder/position_encodings/encodings": "model.encoder.embed_positions.weight",
        **_norm("encoder/layer_norm", "model.encoder.layer_norm"),
        "decoder/embeddings/weight": "model.decoder.embed_tokens.weight",
        "decoder/position_encodings/encodings": "model.decoder.embed_positions.weight",
        **_norm("decoder/layer_norm", "model.decoder.layer_norm"),
    }
    for key, name in renamed.items():
        out[name] = v[key]
    for side in ("encoder", "decoder"):
        for index in range(_count_layers(v, side)):
            out.update(_layer(v, side, index))
    return {name: np.ascontiguousarray(value) for name, value in out.items()}


def model_config(v: dict[str, np.ndarray]) -> dict[str, Any]:
    """transformers' ``WhisperConfig`` of the model, from its variables' shapes."""
    vocabulary, width = v["decoder/embeddings/weight"].shape
    return {
        "model_type": "whisper",
        "architectures": ["WhisperForConditionalGeneration"],
        "vocab_size": int(vocabulary),
        "d_model": int(width),
        "num_mel_bins": int(v["encoder/conv1/weight"].shape[1]),
        "encoder_layers": _count_layers(v, "encoder"),
        "decoder_layers": _count_layers(v, "decoder"),
        "encoder_attention_heads": int(v["encoder/num_heads"]),
        "decoder_attention_heads": int(v["decoder/num_heads"]),
        "encoder_ffn_dim": int(v["encoder/layer_0/ffn/linear_0/weight"].shape[0]),
        "decoder_ffn_dim": int(v["decoder/layer_0/ffn/linear_0/weight"].shape[0]),
        "max_source_positions": int(v["encoder/position_encodings/encodings"].shape[0]),
        "max_target_positions": int(v["decoder/position_encodings/encodings"].shape[0]),
        "tie_word_embeddings": True,
    }


def generation_config(ct2: dict[str, Any], tokenizer: Path) -> dict[str, Any]:
    """transformers' ``GenerationConfig`` of the model (what its own ``generate`` and this
    engine read): the special tokens from the tokenizer, and from CTranslate2's
    ``config.json`` the tokens suppressed always and at the first step, the alignment heads
    (word timestamps) and the language tokens."""
    vocabulary = json.loads(tokenizer.read_text(encoding="utf-8"))
    ids = {item["content"]: item["id"] for item in vocabulary.get("added_tokens", [])}
    names = {token: name for name, token in ids.items()}
    languages = {names[i]: i for i in ct2.get("lang_ids", []) if i in names}
    sot, eot = ids["<|startoftranscript|>"], ids["<|endoftext|>"]
    config: dict[str, Any] = {
        "bos_token_id": eot,
        "eos_token_id": eot,
        "pad_token_id": eot,
        "decoder_start_token_id": sot,
        "no_timestamps_token_id": ids["<|notimestamps|>"],
        "prev_sot_token_id": ids["<|startofprev|>"],
        "max_initial_timestamp_index": 50,
        "max_length": 448,
        "suppress_tokens": list(ct2.get("suppress_ids", [])),
        "begin_suppress_tokens": list(ct2.get("suppress_ids_begin", [])),
        "alignment_heads": [list(pair) for pair in ct2.get("alignment_heads", [])],
        "is_multilingual": bool(languages),
    }
    if languages:
        config["lang_to_id"] = languages
        config["task_to_id"] = {task: ids[f"<|{task}|>"] for task in ("transcribe", "translate")}
    return config


def converted(source: Path, cache_dir: Path, name: str) -> Path:
    """The transformers-format copy of the CTranslate2 model in ``source``, converted into
    ``cache_dir/transformers/<name>`` unless a copy of the same source is there already."""
    target = cache_dir / "transformers" / name.replace("/", "--")
    model = source / "model.bin"
    stamp = {"model_bin": str(model.resolve()), "size": model.stat().st_size}
    stamp["mtime_ns"] = model.stat().st_mtime_ns
    if _stamped(target, stamp):
        return target
    try:
        _convert(source, target)
    except (Ct2FormatError, KeyError) as exc:
        raise ModelNotFoundError(
            f"{model} is not a CTranslate2 Whisper model this engine can convert ({exc})"
        ) from exc
    except OSError as exc:
        raise ModelNotFoundError(f"could not convert {model} into {target}: {exc}") from exc
    _write_atomic(target / STAMP, json.dumps(stamp))
    return target


def _stamped(target: Path, stamp: dict[str, Any]) -> bool:
    try:
        found = json.loads((target / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return bool(found == stamp and (target / WEIGHTS).is_file())


def _convert(source: Path, target: Path) -> None:
    from safetensors.numpy import save_file

    spec, variables = read_variables(source / "model.bin")
    if spec != "WhisperSpec":
        raise Ct2FormatError(f"its spec is {spec}, not WhisperSpec")
    ct2 = json.loads((source / "config.json").read_text(encoding="utf-8"))
    target.mkdir(parents=True, exist_ok=True)
    (target / STAMP).unlink(missing_ok=True)
    weights = {k: _float(a) for k, a in state_dict(variables).items()}
    temporary = target / f".{WEIGHTS}.{os.getpid()}.tmp"
    save_file(weights, str(temporary), metadata={"format": "pt"})
    os.replace(temporary, target / WEIGHTS)
    _write_atomic(target / "config.json", json.dumps(model_config(variables), indent=1))
    generation = generation_config(ct2, source / "tokenizer.json")
    _write_atomic(target / "generation_config.json", json.dumps(generation, indent=1))
    shutil.copyfile(source / "tokenizer.json", target / "tokenizer.json")


def _float(array: np.ndarray) -> np.ndarray:
    return array if array.dtype in (np.float16, np.float32) else array.astype(np.float32)


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
