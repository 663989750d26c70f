"""The GPU code a CUDA library carries, read from its ELF file, and which of it a card runs.

nvcc puts a library's device code in its ``.nv_fatbin`` section: fat binaries, each a
16-byte header (magic ``0xBA55ED50``, version, header size, size of the entries) and its
entries, each a header (kind: 1 PTX, 2 a cubin; its header size and payload size; at byte
28 the architecture as ``10 * major + minor``) then the payload, compressed or not. The
layout is NVIDIA's ``fatbinary.h`` as n-eiling/cuda-fatbin-decompression reads it
(``fatbin-decompress.h``); on CTranslate2 4.8.5's wheel each entry's architecture is the
one its decompressed cubin's ELF flags (``e_flags & 0xff``) or its PTX's ``.target`` name.

A cubin for ``sm_XY`` runs on the cards of compute capability X.Z, Z >= Y (same major);
PTX for ``compute_XY`` is compiled by the driver, at run time, for any card of capability
X.Y or newer (NVIDIA's CUDA C++ Programming Guide, "Binary Compatibility" and "PTX
Compatibility").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

FATBIN_MAGIC = 0xBA55ED50
PTX, CUBIN = 1, 2
_ARCH_AT = 28  # the architecture's offset in an entry's header
_ELF64_LITTLE = b"\x7fELF\x02\x01"


@dataclass(frozen=True)
class GpuCode:
    """A library's device code: the architectures of its cubins (``sm_XY``) and of its PTX
    (``compute_XY``), each as ``XY``, ascending."""

    cubins: tuple[int, ...]
    ptx: tuple[int, ...]

    def describe(self) -> str:
        """``sm_53, …, sm_86 and compute_86 PTX``, or that there is none."""
        names = [f"sm_{arch}" for arch in self.cubins]
        names += [f"compute_{arch} PTX" for arch in self.ptx]
        if not names:
            return "no CUDA code"
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


@dataclass(frozen=True)
class Card:
    """A CUDA card as NVML names it, with its compute capability (major, minor)."""

    name: str
    capability: tuple[int, int]

    @property
    def arch(self) -> int:
        return 10 * self.capability[0] + self.capability[1]

    def describe(self) -> str:
        major, minor = self.capability
        return f"{self.name} (compute capability {major}.{minor}, sm_{self.arch})"


def cubin_for(code: GpuCode, card: Card) -> int | None:
    """The newest of ``code``'s cubins that ``card`` runs: same major, minor not above."""
    fits = [arch for arch in code.cubins if arch // 10 == card.arch // 10 and arch <= card.arch]
    return max(fits, default=None)


def ptx_for(code: GpuCode, card: Card) -> int | None:
    """The newest of ``code``'s PTX the driver can compile for ``card``."""
    return max((arch for arch in code.ptx if arch <= card.arch), default=None)


def read_gpu_code(library: Path) -> GpuCode:
    """The device code in a 64-bit little-endian ELF library (none without ``.nv_fatbin``);
    ValueError where the file is not one or its fat binaries do not parse."""
    with library.open("rb") as file:
        section = _section(file, ".nv_fatbin")
    return parse_fatbin(section) if section is not None else GpuCode((), ())


def parse_fatbin(data: bytes) -> GpuCode:
    """The architectures of the cubins and PTX in a ``.nv_fatbin`` section's fat binaries
    (zero bytes between them are padding)."""
    cubins: set[int] = set()
    ptx: set[int] = set()
    at = 0
    while at + 16 <= len(data):
        magic, _version, header_size, size = struct.unpack_from("<IHHQ", data, at)
        if magic == 0:
            at += 8
            continue
        if magic != FATBIN_MAGIC or header_size < 16:
            raise ValueError(f"no fat binary at byte {at} of .nv_fatbin")
        entry, end = at + header_size, at + header_size + size
        while entry < end:
            kind, _, entry_size, payload = struct.unpack_from("<HHIQ", data, entry)
            if entry_size <= _ARCH_AT:
                raise ValueError(f"a fat binary entry of {entry_size} bytes at byte {entry}")
            (arch,) = struct.unpack_from("<I", data, entry + _ARCH_AT)
            if kind == CUBIN:
                cubins.add(arch)
            elif kind == PTX:
                ptx.add(arch)
            entry += entry_size + payload
        at = end
    return GpuCode(tuple(sorted(cubins)), tuple(sorted(ptx)))


def _section(file: BinaryIO, wanted: str) -> bytes | None:
    header = file.read(64)
    if len(header) < 64 or not header.startswith(_ELF64_LITTLE):
        raise ValueError("not a 64-bit little-endian ELF file")
    (table_at,) = struct.unpack_from("<Q", header, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", header, 0x3A)
    file.seek(table_at)
    table = file.read(entry_size * count)
    # Elf64_Shdr: name, type, flags, address, offset, size
    sections = [struct.unpack_from("<IIQQQQ", table, i * entry_size) for i in range(count)]
    if names_index >= count:
        raise ValueError("the ELF file names no section-name table")
    file.seek(sections[names_index][4])
    names = file.read(sections[names_index][5])
    for name_at, _, _, _, offset, size in sections:
        if names[name_at : names.index(b"\0", name_at)].decode("ascii", "replace") == wanted:
            file.seek(offset)
            return file.read(size)
    return None
