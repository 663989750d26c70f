"""CTranslate2's model.bin read as a table of named arrays, and turned into transformers'
layout: written and read back, int8 weights dequantized, fused projections split."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from asrserve.engine.ct2_file import (
    Ct2FormatError,
    dequantized,
    quantize_int8,
    read_raw,
    read_variables,
    write_model,
)
from asrserve.engine.pytorch.convert import model_config, state_dict

RNG = np.random.default_rng(3)


def test_variables_come_back_as_written(tmp_path: Path) -> None:
    variables: dict[str, np.ndarray] = {
        "a/weight": RNG.normal(size=(4, 3)).astype(np.float16),
        "b/bias": RNG.normal(size=(5,)).astype(np.float32),
        "num_heads": np.array(6, dtype=np.int16),
    }
    write_model(tmp_path / "model.bin", "WhisperSpec", 3, variables)
    spec, revision, read = read_raw(tmp_path / "model.bin")
    assert (spec, revision) == ("WhisperSpec", 3)
    assert read.keys() == variables.keys()
    for name, value in variables.items():
        assert read[name].dtype == value.dtype
        np.testing.assert_array_equal(read[name], value)


def test_an_int8_weight_is_its_scale_away_from_the_floats(tmp_path: Path) -> None:
    weight = RNG.normal(size=(8, 16)).astype(np.float32)
    quantized, scale = quantize_int8(weight)
    assert quantized.dtype == np.int8 and scale.shape == (8,)
    variables = {"x/weight": quantized, "x/weight_scale": scale, "x/bias": weight[0]}
    write_model(tmp_path / "model.bin", "WhisperSpec", 3, variables)
    _, floats = read_variables(tmp_path / "model.bin")
    assert set(floats) == {"x/weight", "x/bias"}  # the scale is spent
    step = np.abs(weight).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(floats["x/weight"] - weight) <= step / 2 + 1e-7)


def test_bfloat16_reads_as_the_upper_half_of_float32(tmp_path: Path) -> None:
    values = np.array([1.0, -2.5, 3.140625], dtype=np.float32)
    halves = (values.view(np.uint32) >> 16).astype("<u2")
    path = tmp_path / "model.bin"
    write_model(path, "WhisperSpec", 3, {})
    name = b"w"
    record = struct.pack("<H", len(name) + 1) + name + b"\0" + struct.pack("<BI", 1, 3)
    record += struct.pack("<BI", 5, halves.nbytes) + halves.tobytes()
    data = path.read_bytes()
    header_end = data.index(b"WhisperSpec") + len(b"WhisperSpec\0") + 4
    patched = data[:header_end] + struct.pack("<I", 1) + record + struct.pack("<I", 0)
    path.write_bytes(patched)
    _, read = read_variables(path)
    np.testing.assert_array_equal(read["w"], values)


def test_an_old_or_truncated_file_is_refused(tmp_path: Path) -> None:
    old = tmp_path / "old.bin"
    old.write_bytes(struct.pack("<I", 3))
    with pytest.raises(Ct2FormatError, match="binary version 3"):
        read_raw(old)
    cut = tmp_path / "cut.bin"
    write_model(cut, "WhisperSpec", 3, {"w": np.zeros((64,), dtype=np.float32)})
    cut.write_bytes(cut.read_bytes()[:-40])
    with pytest.raises(Ct2FormatError, match="ends inside variable w"):
        read_raw(cut)


def _whisper(width: int = 8, layers: int = 1) -> dict[str, np.ndarray]:
    """A CTranslate2 Whisper model's variables, every value distinct."""
    v: dict[str, np.ndarray] = {}

    def put(name: str, *shape: int) -> None:
        v[name] = RNG.normal(size=shape).astype(np.float32)

    for side in ("encoder", "decoder"):
        put(f"{side}/position_encodings/encodings", 10, width)
        put(f"{side}/layer_norm/gamma", width)
        put(f"{side}/layer_norm/beta", width)
        v[f"{side}/num_heads"] = np.array(2, dtype=np.int16)
        for i in range(layers):
            scopes = {"self_attention": [3 * width, width], "ffn": [4 * width]}
            if side == "decoder":
                scopes["attention"] = [width, 2 * width, width]
            for scope, rows in scopes.items():
                put(f"{side}/layer_{i}/{scope}/layer_norm/gamma", width)
                put(f"{side}/layer_{i}/{scope}/layer_norm/beta", width)
                if scope == "ffn":
                    put(f"{side}/layer_{i}/ffn/linear_0/weight", 4 * width, width)
                    put(f"{side}/layer_{i}/ffn/linear_0/bias", 4 * width)
                    put(f"{side}/layer_{i}/ffn/linear_1/weight", width, 4 * width)
                    put(f"{side}/layer_{i}/ffn/linear_1/bias", width)
                    continue
                if scope == "self_attention":
                    rows = [3 * width, width]
                for n, out in enumerate(rows):
                    put(f"{side}/layer_{i}/{scope}/linear_{n}/weight", out, width)
                    put(f"{side}/layer_{i}/{scope}/linear_{n}/bias", out)
    put("encoder/conv1/weight", width, 4, 3)
    put("encoder/conv1/bias", width)
    put("encoder/conv2/weight", width, width, 3)
    put("encoder/conv2/bias", width)
    put("decoder/embeddings/weight", 20, width)
    return v


def test_fused_projections_split_into_q_k_v() -> None:
    v = _whisper()
    out = state_dict(v)
    fused = v["decoder/layer_0/self_attention/linear_0/weight"]
    layer = "model.decoder.layers.0"
    np.testing.assert_array_equal(out[f"{layer}.self_attn.q_proj.weight"], fused[:8])
    np.testing.assert_array_equal(out[f"{layer}.self_attn.k_proj.weight"], fused[8:16])
    np.testing.assert_array_equal(out[f"{layer}.self_attn.v_proj.weight"], fused[16:])
    assert f"{layer}.self_attn.k_proj.bias" not in out  # Whisper's k has none
    cross = v["decoder/layer_0/attention/linear_1/weight"]
    np.testing.assert_array_equal(out[f"{layer}.encoder_attn.k_proj.weight"], cross[:8])
    np.testing.assert_array_equal(out[f"{layer}.encoder_attn.v_proj.weight"], cross[8:])
    query = v["decoder/layer_0/attention/linear_0/weight"]
    np.testing.assert_array_equal(out[f"{layer}.encoder_attn.q_proj.weight"], query)
    norm = v["decoder/layer_0/attention/layer_norm/gamma"]
    np.testing.assert_array_equal(out[f"{layer}.encoder_attn_layer_norm.weight"], norm)


def test_the_config_is_read_off_the_shapes() -> None:
    config = model_config(_whisper(width=8, layers=1))
    assert config["d_model"] == 8 and config["vocab_size"] == 20
    assert (config["encoder_layers"], config["decoder_layers"]) == (1, 1)
    assert config["encoder_ffn_dim"] == 32 and config["num_mel_bins"] == 4
    assert (config["max_source_positions"], config["max_target_positions"]) == (10, 10)
    assert config["decoder_attention_heads"] == 2


def test_dequantized_keeps_floats_and_scalars() -> None:
    scalar = np.array(5, dtype=np.int16)
    floats = np.ones((2, 2), dtype=np.float16)
    out = dequantized({"n": scalar, "f": floats})
    assert out["n"] is scalar and out["f"] is floats
