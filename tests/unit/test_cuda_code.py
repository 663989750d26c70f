"""Reading the GPU code a CUDA library carries (its ``.nv_fatbin`` section), and which of it
a card of a given compute capability runs."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from asrserve.engine.cuda_code import (
    CUBIN,
    PTX,
    Card,
    GpuCode,
    cubin_for,
    parse_fatbin,
    ptx_for,
    read_gpu_code,
)

CTRANSLATE2_4_8_5 = GpuCode(cubins=(53, 60, 61, 70, 75, 80, 86), ptx=(86,))


def entry(kind: int, arch: int, payload: bytes = b"\x01" * 24) -> bytes:
    """A fat binary entry as nvcc writes one: a 64-byte header, then its payload."""
    header = struct.pack("<HHIQIIHHI", kind, 0x0101, 64, len(payload), 0, 0, 7, 1, arch)
    return header.ljust(64, b"\0") + payload


def fatbin(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def elf(sections: dict[str, bytes]) -> bytes:
    """A 64-bit little-endian ELF file holding these sections (after the null one and the
    section-name table)."""
    names = b"\0" + b"".join(name.encode() + b"\0" for name in [".shstrtab", *sections])
    contents = [b"", names, *sections.values()]
    name_at = [0, 1]
    for name in sections:
        name_at.append(names.index(name.encode() + b"\0"))
    data, offsets = b"", []
    for content in contents:
        offsets.append(64 + len(data))
        data += content
    table_at = 64 + len(data)
    header = b"\x7fELF\x02\x01\x01".ljust(16, b"\0")
    count = len(contents)
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, table_at, 0, 64, 0, 0, 64, count, 1)
    table = b"".join(
        struct.pack("<IIQQQQIIQQ", at, 1, 0, 0, offset, len(content), 0, 0, 1, 0)
        for at, offset, content in zip(name_at, offsets, contents, strict=True)
    )
    return header + data + table


def test_a_fat_binary_names_its_cubins_and_ptx() -> None:
    section = fatbin(entry(CUBIN, 80), entry(PTX, 86), entry(CUBIN, 86))
    section += b"\0" * 8 + fatbin(entry(CUBIN, 120), entry(CUBIN, 80))
    assert parse_fatbin(section) == GpuCode(cubins=(80, 86, 120), ptx=(86,))


def test_what_is_not_a_fat_binary_is_refused() -> None:
    with pytest.raises(ValueError, match="no fat binary at byte 0"):
        parse_fatbin(b"\x50\xed\x55\xbb" + b"\0" * 12)
    with pytest.raises(ValueError, match="a fat binary entry of 16 bytes"):
        parse_fatbin(fatbin(struct.pack("<HHIQ", CUBIN, 0, 16, 0)))


def test_a_library_is_read_for_its_fatbin_section(tmp_path: Path) -> None:
    library = tmp_path / "libcuda_code.so"
    code = fatbin(entry(CUBIN, 75), entry(PTX, 75))
    library.write_bytes(elf({".text": b"\x90" * 8, ".nv_fatbin": code}))
    assert read_gpu_code(library) == GpuCode(cubins=(75,), ptx=(75,))
    library.write_bytes(elf({".text": b"\x90" * 8}))
    assert read_gpu_code(library) == GpuCode(cubins=(), ptx=())
    library.write_bytes(b"MZ" + b"\0" * 62)
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF file"):
        read_gpu_code(library)


@pytest.mark.parametrize(
    ("capability", "cubin", "ptx"),
    [
        ((5, 2), None, None),  # Maxwell below CTranslate2's oldest cubin, sm_53
        ((6, 2), 61, None),  # a cubin runs on its major's later minors
        ((7, 2), 70, None),
        ((8, 0), 80, None),
        ((8, 9), 86, 86),  # Ada on Ampere's sm_86
        ((9, 0), None, 86),  # Hopper: another major, the PTX alone
        ((10, 0), None, 86),
        ((12, 0), None, 86),
    ],
)
def test_which_code_a_card_runs(
    capability: tuple[int, int], cubin: int | None, ptx: int | None
) -> None:
    card = Card("a card", capability)
    assert (cubin_for(CTRANSLATE2_4_8_5, card), ptx_for(CTRANSLATE2_4_8_5, card)) == (cubin, ptx)


def test_the_code_and_the_card_in_words() -> None:
    assert CTRANSLATE2_4_8_5.describe() == (
        "sm_53, sm_60, sm_61, sm_70, sm_75, sm_80, sm_86 and compute_86 PTX"
    )
    assert GpuCode(cubins=(90,), ptx=()).describe() == "sm_90"
    assert GpuCode(cubins=(), ptx=()).describe() == "no CUDA code"
    card = Card("NVIDIA GeForce RTX 5090", (12, 0))
    assert card.describe() == "NVIDIA GeForce RTX 5090 (compute capability 12.0, sm_120)"
