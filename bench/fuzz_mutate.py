"""Seeded mutations of corpus files, one family per kind of file (the fuzz harness's inputs).

The same mutation kinds as the loaders' own fuzz tests (tests/test_mdx_errors.py,
tests/test_halo_errors.py, tests/test_textures_corrupt.py, tests/test_mdl_errors.py), applied to
whole corpus files: byte flips, "interesting" 32-bit values (counts, sizes, object ids near 2^32)
in the file's byte order, non-finite or huge floats, truncation, insertion and deletion; MDL text
gets token-level edits (numbers replaced by hostile ones, lines dropped or repeated, braces lost).
Texture headers get half of their mutations in the first 200 bytes, where the fields are.
Structure-aware kinds (issue 23) reach the fields the byte mutations rarely hit together: huge
counts, sizes and offsets written into the known header fields of each texture format (DDS mip
count, sides, pitch, depth, DX10 array size; BLP mip offset/size tables, sides, JPEG header size;
TGA sides, image ID length, colour-map length), Halo tag block counts (the model and bitmap body's
reflexives), MDX chunk sizes and the first u32 of a chunk's records (an inclusive size or a
count), any small u32 of a file (a likely count) made huge, and for MDL text deep brace nesting.
`mutate(data, kind, rng)` depends only on its arguments.
"""

from __future__ import annotations

import random
import re
import struct

import numpy as np

# file suffix -> (kind, byte order): what the harness does with it and how its numbers are stored
KINDS = {
    ".mdx": ("model", "<"), ".mdl": ("mdl", "<"), ".model": ("model", ">"), ".gbxmodel": ("model", ">"),
    ".blp": ("texture", "<"), ".dds": ("texture", "<"), ".tga": ("texture", "<"), ".png": ("texture", ">"),
    ".bitmap": ("bitmap", ">"),
}
INTERESTING_U32 = (0, 1, 2, 3, 4, 7, 8, 255, 256, 1024, 16384, 16385, 65535, 0x7FFFFFFF, 0x80000000,
                   0xFFFFFFFE, 0xFFFFFFFF)
STRUCTURED_SHARE = 0.4  # binary cases whose mutation is a structure-aware one (`_structured`)
HUGE_U32 = (0xFFFFFFFF, 0xFFFFFFFE, 0x80000000, 0x7FFFFFFF, 0x10000000, 0x01000000, 65536, 65535, 16385)
HOSTILE_FLOATS = (float("nan"), float("inf"), float("-inf"), -1e38, 1e30, 3.4e38, 1e-40)
HOSTILE_TOKENS = ("4294967295", "4294967294", "2147483648", "-1", "-2147483648", "0", "99999999999999999999",
                  "1e308", "-1e308", "nan", "inf", "1e-320", "65536")


def _binary(data: bytes, order: str, rng: random.Random, header: bool) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not b:
            break
        span = min(len(b), 200) if header and rng.random() < 0.5 else len(b)
        kind = rng.random()
        if kind < 0.3:  # flip a few bytes
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(span)] = rng.randrange(256)
        elif kind < 0.6 and span >= 4:  # a corrupt count, size, offset or id
            at = rng.randrange(span - 3)
            if rng.random() < 0.7:
                at &= ~3
            value = rng.choice(INTERESTING_U32) if rng.random() < 0.8 else rng.randrange(1 << 32)
            struct.pack_into(order + "I", b, at, value)
        elif kind < 0.7 and span >= 4:  # a float field
            at = rng.randrange(span - 3) & ~3
            struct.pack_into(order + "f", b, at, rng.choice(HOSTILE_FLOATS))
        elif kind < 0.8:  # truncate
            del b[rng.randrange(len(b)):]
        elif kind < 0.9:  # insert bytes
            at = rng.randrange(len(b) + 1)
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:  # delete bytes
            at = rng.randrange(len(b))
            del b[at:at + rng.randint(1, 16)]
    return bytes(b)


# Header fields that hold a count, a size, an offset or a side: (offset, byte width) per format.
TEXTURE_FIELDS = {
    b"DDS ": [(12, 4), (16, 4), (20, 4), (24, 4), (28, 4), (128, 4), (140, 4)],  # h, w, pitch, depth, mips, DX10
    b"BLP1": [(12, 4), (16, 4), (24, 4), (156, 4)] + [(28 + 4 * k, 4) for k in range(32)],  # sides, mip tables
    b"BLP2": [(12, 4), (16, 4), (11, 1)] + [(20 + 4 * k, 4) for k in range(32)],
    b"TGA": [(0, 1), (3, 2), (5, 2), (12, 2), (14, 2), (16, 1)],  # ID length, colour map, sides, depth
}
HALO_BODY = 64
HALO_COUNTS = {".model": [172, 184, 196, 208, 220], ".gbxmodel": [172, 184, 196, 208, 220], ".bitmap": [84, 96]}


def _put(b: bytearray, at: int, width: int, order: str, value: int) -> None:
    if 0 <= at and at + width <= len(b):
        b[at:at + width] = (value & ((1 << 8 * width) - 1)).to_bytes(width, "little" if order == "<" else "big")


def _texture_fields(b: bytearray, rng: random.Random) -> None:
    """A huge (or zero) value in one or two of the header fields of a DDS, BLP or TGA."""
    fields = TEXTURE_FIELDS.get(bytes(b[:4]), TEXTURE_FIELDS[b"TGA"] if b[:4] != b"\x89PNG" else [(16, 4), (20, 4)])
    order = ">" if b[:4] == b"\x89PNG" else "<"
    for _ in range(rng.randint(1, 2)):
        at, width = rng.choice(fields)
        value = rng.choice(HUGE_U32) if rng.random() < 0.9 else 0
        _put(b, at, width, order, value)


def _halo_counts(b: bytearray, suffix: str, rng: random.Random) -> None:
    """A huge count in one of the tag body's top-level blocks (reflexive: count, pointer, definition)."""
    at = HALO_BODY + rng.choice(HALO_COUNTS[suffix])
    _put(b, at, 4, ">", rng.choice(HUGE_U32))


def _mdx_chunks(b: bytearray, rng: random.Random) -> None:
    """A huge size in an MDX chunk header, or in the first u32 of its body (a record size or a count)."""
    chunks, at = [], 4
    while at + 8 <= len(b):
        size = int.from_bytes(b[at + 4:at + 8], "little")
        chunks.append(at)
        at += 8 + size
    if not chunks:
        return
    at = rng.choice(chunks)
    _put(b, at + (4 if rng.random() < 0.4 else 8), 4, "<", rng.choice(HUGE_U32))


def _likely_count(b: bytearray, order: str, rng: random.Random) -> None:
    """A small non-zero aligned u32 (probably a count, a size or an index) made huge."""
    words = np.frombuffer(bytes(b[:len(b) // 4 * 4]), order + "u4")
    candidates = np.flatnonzero((words > 0) & (words <= 4096))
    if len(candidates):
        _put(b, 4 * int(candidates[rng.randrange(len(candidates))]), 4, order, rng.choice(HUGE_U32))
    elif len(b) >= 4:
        _put(b, rng.randrange(len(b) - 3) & ~3, 4, order, rng.choice(HUGE_U32))


def _structured(data: bytes, suffix: str, order: str, rng: random.Random) -> bytes:
    b = bytearray(data)
    kind, _ = KINDS[suffix]
    pick = rng.random()
    if kind == "texture" and pick < 0.7:
        _texture_fields(b, rng)
    elif suffix in HALO_COUNTS and pick < 0.5:
        _halo_counts(b, suffix, rng)
    elif suffix == ".mdx" and pick < 0.5:
        _mdx_chunks(b, rng)
    else:
        _likely_count(b, order, rng)
    return bytes(b)


def _nesting(b: bytes, rng: random.Random) -> bytes:
    """Deep nesting: thousands of '{' (or nested blocks) at a random place of MDL text."""
    depth = rng.choice((1000, 1000, 10_000, 10_000, 100_000))
    at = rng.randrange(len(b) + 1)
    unit = b"{ " if rng.random() < 0.5 else b'Helper "n" { '
    return b[:at] + unit * depth + (b"} " * depth if rng.random() < 0.5 else b"") + b[at:]


_NUMBER = re.compile(rb"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")


def _mdl(data: bytes, rng: random.Random) -> bytes:
    b = data
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.45:  # a number -> a hostile one
            numbers = [m.span() for m in _NUMBER.finditer(b)]
            if numbers:
                s, e = rng.choice(numbers)
                b = b[:s] + rng.choice(HOSTILE_TOKENS).encode() + b[e:]
        elif kind < 0.65:  # drop or repeat a line
            lines = b.split(b"\n")
            i = rng.randrange(len(lines))
            if rng.random() < 0.5:
                del lines[i]
            else:
                lines.insert(i, lines[i])
            b = b"\n".join(lines)
        elif kind < 0.75:  # lose a brace
            braces = [i for i, c in enumerate(b) if c in b"{}"]
            if braces:
                i = rng.choice(braces)
                b = b[:i] + b[i + 1:]
        elif kind < 0.83:  # truncate
            b = b[:rng.randrange(len(b) + 1)]
        elif kind < 0.85:
            b = _nesting(b, rng)
        else:
            b = _binary(b, "<", rng, header=False)
    return b


def mutate(data: bytes, suffix: str, rng: random.Random) -> bytes:
    """One mutated copy of `data`, a file with `suffix` (a key of KINDS)."""
    kind, order = KINDS[suffix]
    if kind == "mdl":
        return _mdl(data, rng)
    if rng.random() < STRUCTURED_SHARE:
        return _structured(data, suffix, order, rng)
    return _binary(data, order, rng, header=kind == "texture")
