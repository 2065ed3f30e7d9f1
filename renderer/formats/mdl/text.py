"""Writing MDL text: float32 numbers in their shortest round-tripping form, strings, indentation.

Floats are float32 in the model; each is written with the fewest significant digits that read
back to the same 32 bits (Python's %g, so trailing zeros go and very large or small values use an
exponent), e.g. 0.1 -> "0.1", 1/3 -> "0.33333334", 30 -> "30". Arrays are formatted in bulk (see
`fmt_floats`). NaNs keep their sign ("-nan"); other NaN payload bits are not kept.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from renderer.errors import Diagnostic

from .tokens import F32, f32

FLT_MIN = 1.1754943508222875e-38  # smallest normal float32


def fmt_float(x) -> str:
    """One float32 value, shortest text that reads back bit for bit."""
    try:
        b = F32.pack(x)
    except OverflowError:
        b = F32.pack(f32(float(x)))
    v = F32.unpack(b)[0]
    if v != v:
        return "-nan" if b[3] & 0x80 else "nan"
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    # Six digits are always at least as short as the shortest form, except for subnormals (fewer
    # significant bits), where shorter forms are searched too.
    for p in range(1 if abs(v) < FLT_MIN else 6, 10):
        s = f"{v:.{p}g}"
        if F32.pack(float(s)) == b:
            return s
    return repr(v)  # not reached: 9 significant digits always round-trip a float32


def fmt_floats(a) -> list[str]:
    """Every value of a float array (any shape, flattened), as `fmt_float` would write it.

    The digit count each value needs (6..9) is found with numpy (round to p significant digits,
    back to float32, compare bits); each value is then formatted once, all the text is parsed back
    in one call, and the rare value that did not survive (or a NaN) goes through `fmt_float`.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        arr = np.ascontiguousarray(a, dtype=np.float32).ravel()
    n = arr.size
    if n == 0:
        return []
    bits = arr.view(np.uint32)
    digits = np.full(n, 9, np.int8)
    with np.errstate(all="ignore"):
        a64 = arr.astype(np.float64)
        absx = np.abs(a64)
        e = np.floor(np.log10(np.where(absx > 0, absx, 1.0)))
        todo = np.isfinite(a64)
        for p in (6, 7, 8):
            scale = 10.0 ** (p - 1 - e)
            q = (np.round(a64 * scale) / scale).astype(np.float32).view(np.uint32)
            hit = todo & (q == bits)
            digits[hit] = p
            todo &= ~hit
    out_arr = np.empty(n, object)
    for p in (6, 7, 8, 9):
        idx = np.flatnonzero(digits == p)
        if len(idx):
            out_arr[idx] = list(map(f"{{:.{p}g}}".format, a64[idx].tolist()))
    out: list[str] = out_arr.tolist()
    with np.errstate(over="ignore", invalid="ignore"):
        back = np.array(out, dtype=np.float64).astype(np.float32).view(np.uint32)
    redo = back != bits
    with np.errstate(invalid="ignore"):
        redo |= (arr != 0) & (np.abs(arr) < FLT_MIN)  # subnormals: maybe shorter than 6 digits
    for j in np.flatnonzero(redo).tolist():
        out[j] = fmt_float(arr[j].item()) if arr[j] == arr[j] else ("-nan" if bits[j] & 0x80000000 else "nan")
    return out


def fmt_ints(a) -> list[str]:
    return [str(v) for v in np.asarray(a).ravel().tolist()]


def same_bits(a, b) -> bool:
    """Equality that tells -0.0 from 0.0 and NaN from everything (NaN equals NaN)."""
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        if not (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list))) or len(a) != len(b):
            return False
        return all(same_bits(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        try:
            return F32.pack(a) == F32.pack(b)
        except (OverflowError, TypeError, struct.error):
            return a == b
    return a == b



class Out:
    """Lines of MDL text with tab indentation; diagnostics about what could not be written."""

    __slots__ = ("parts", "depth", "diagnostics")

    def __init__(self):
        self.parts: list[str] = []
        self.depth = 0
        self.diagnostics: list[Diagnostic] = []

    def line(self, s: str) -> None:
        self.parts.append("\t" * self.depth + s + "\n")

    def open(self, head: str) -> None:
        self.parts.append("\t" * self.depth + head + " {\n")
        self.depth += 1

    def close(self) -> None:
        self.depth -= 1
        self.parts.append("\t" * self.depth + "}\n")

    def raw(self, s: str) -> None:
        self.parts.append(s)

    def diag(self, where: str, message: str) -> None:
        self.diagnostics.append(Diagnostic(where, None, message))

    def quote(self, s: str, where: str = "string") -> str:
        s = str(s)
        if '"' in s or "\n" in s or "\r" in s:
            self.diag(where, f"{s!r} holds a quote or line break, which MDL strings cannot; replaced with ' and space")
            s = s.replace('"', "'").replace("\r", " ").replace("\n", " ")
        return '"' + s + '"'

    def text(self) -> str:
        return "".join(self.parts)


def vec(values) -> str:
    return "{ " + ", ".join(fmt_floats(values)) + " }"


def ivec(values) -> str:
    return "{ " + ", ".join(str(int(v)) for v in values) + " }"


def rows_text(arr: np.ndarray, k: int, indent: str) -> str:
    """Rows of k numbers as `indent{ a, b, c },` lines (float32 arrays)."""
    n = len(arr)
    if n == 0:
        return ""
    s = fmt_floats(arr)
    row = indent + "{ " + ", ".join(["%s"] * k) + " },\n"
    return (row * n) % tuple(s)


def int_rows_text(arr: np.ndarray, k: int, indent: str, braces: bool = True) -> str:
    n = len(arr)
    if n == 0:
        return ""
    s = fmt_ints(arr)
    row = indent + ("{ " if braces else "") + ", ".join(["%s"] * k) + (" }" if braces else "") + ",\n"
    return (row * n) % tuple(s)
