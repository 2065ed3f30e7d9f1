"""Seeded mutations of corpus files, one family per kind of file (the fuzz harness's inputs).

The same mutation kinds as the loaders' own fuzz tests (tests/test_mdx_errors.py,
tests/test_halo_errors.py, tests/test_textures_corrupt.py, tests/test_mdl_errors.py), applied to
whole corpus files: byte flips, "interesting" 32-bit values (counts, sizes, object ids near 2^32)
in the file's byte order, non-finite or huge floats, truncation, insertion and deletion; MDL text
gets token-level edits (numbers replaced by hostile ones, lines dropped or repeated, braces lost).
Texture headers get half of their mutations in the first 200 bytes, where the fields are.
`mutate(data, kind, rng)` depends only on its arguments.
"""

from __future__ import annotations

import random
import re
import struct

# file suffix -> (kind, byte order): what the harness does with it and how its numbers are stored
KINDS = {
    ".mdx": ("model", "<"), ".mdl": ("mdl", "<"), ".model": ("model", ">"), ".gbxmodel": ("model", ">"),
    ".blp": ("texture", "<"), ".dds": ("texture", "<"), ".tga": ("texture", "<"), ".png": ("texture", ">"),
    ".bitmap": ("bitmap", ">"),
}
INTERESTING_U32 = (0, 1, 2, 3, 4, 7, 8, 255, 256, 1024, 16384, 16385, 65535, 0x7FFFFFFF, 0x80000000,
                   0xFFFFFFFE, 0xFFFFFFFF)
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
        elif kind < 0.85:  # truncate
            b = b[:rng.randrange(len(b) + 1)]
        else:
            b = _binary(b, "<", rng, header=False)
    return b


def mutate(data: bytes, suffix: str, rng: random.Random) -> bytes:
    """One mutated copy of `data`, a file with `suffix` (a key of KINDS)."""
    kind, order = KINDS[suffix]
    if kind == "mdl":
        return _mdl(data, rng)
    return _binary(data, order, rng, header=kind == "texture")
