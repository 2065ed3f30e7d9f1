"""Animated properties: `Name <keys> { <Interp>, [GlobalSeqId g,] frame: value, [InTan v, OutTan v,] ... }`.

Interp is DontInterp, Linear, Hermite or Bezier; InTan/OutTan follow each key for Hermite and
Bezier. Values are a number or `{ a, b, c }` by the track's type (model.TRACK_TYPES). Keys are read
in bulk when they follow the regular layout (slices of the token list checked against the key
pattern), and one by one otherwise, so an error names the first wrong token. A key count that
disagrees with the keys present loads the keys present, with a diagnostic (real files have this).
"""

from __future__ import annotations

import numpy as np

from renderer.model import INTERPOLATIONS, TRACK_TYPES, Track, key_dtype

from .text import Out, fmt_floats, fmt_ints
from .tokens import I32_MIN, U32_END, Parser

INTERP_WORDS = {name: i for i, name in enumerate(INTERPOLATIONS)}
MAX_KEYS = 1 << 24


def read_track(p: Parser, tag: str, name: str) -> Track:
    """The cursor is on the key count (just after the property name)."""
    p.where.append(name)
    n = p.integer(f"the key count of {name}", 0, MAX_KEYS)
    p.expect("{", f"'{{' to start the keys of {name}")
    interp, gsid = None, -1
    while True:
        t = p.peek()
        if t in INTERP_WORDS:
            if interp is not None:
                raise p.error(f"{name} names its interpolation twice")
            interp = INTERP_WORDS[t]
            p.i += 1
        elif t == "GlobalSeqId":
            p.i += 1
            gsid = p.i32("a global sequence id")
        else:
            break
    if interp is None:
        raise p.unexpected("DontInterp, Linear, Hermite or Bezier")
    base, k = TRACK_TYPES[tag]
    cols = _fast_keys(p, n, k, interp >= 2, base, name)
    if cols is None:
        cols = _slow_keys(p, n, k, interp >= 2, base, name)
    frames, values = cols[0], cols[1]
    keys = np.zeros(len(frames), key_dtype(tag, interp))
    keys["frame"] = frames
    keys["value"] = values
    if interp >= 2:
        keys["in_tan"] = cols[2]
        keys["out_tan"] = cols[3]
    p.where.pop()
    return Track(tag, interp, gsid, keys)


def _pattern(k: int, tangents: bool) -> list[str]:
    value = ["{"] + ["#"] * k + ["}"] if k > 1 else ["#"]
    pat = ["#"] + value
    if tangents:
        pat += ["InTan"] + value + ["OutTan"] + value
    return pat


def _fast_keys(p: Parser, n: int, k: int, tangents: bool, base: str, name: str):
    pat = _pattern(k, tangents)
    L = len(pat)
    toks, i = p.toks, p.i
    end = i + n * L
    if end >= p.n or toks[end] != "}":
        return None
    sl = toks[i:end]
    for pos, lit in enumerate(pat):
        if lit != "#" and sl[pos::L] != [lit] * n:
            return None
    slots = [pos for pos, lit in enumerate(pat) if lit == "#"]

    def column(pos: int, kind: str):
        return p._convert(sl[pos::L], kind, name, i, lambda j: i + j * L + pos)

    frames = column(slots[0], "i")
    p.check_range(frames, I32_MIN, (1 << 31) - 1, f"a frame of {name}", i)
    out = [frames]
    for part in range(3 if tangents else 1):
        comps = [column(pos, "i" if base == "<u4" else "f") for pos in slots[1 + part * k : 1 + (part + 1) * k]]
        out.append(_values(p, comps, k, base, name, i))
    p.i = end + 1
    return out


def _values(p: Parser, comps: list[np.ndarray], k: int, base: str, name: str, at: int) -> np.ndarray:
    if base == "<u4":
        for c in comps:
            p.check_range(c, I32_MIN, U32_END - 1, f"a value of {name}", at)
        comps = [c & 0xFFFFFFFF for c in comps]
    return np.stack(comps, axis=1) if k > 1 else comps[0]


def _slow_keys(p: Parser, n: int, k: int, tangents: bool, base: str, name: str):
    frames: list[int] = []
    parts: list[list] = [[] for _ in range(3 if tangents else 1)]

    def value():
        if k == 1:
            braced = p.accept("{")  # tolerate `{ 1 }` for a scalar
            v = p.u32(f"a value of {name}") if base == "<u4" else p.number(f"a value of {name}")
            if braced:
                p.expect("}", f"'}}' after the value of {name}")
            return v
        if base == "<u4":
            return p.int_vector(k, f"value of {name}", p.u32)
        p.expect("{", f"'{{' to start a {k}-number value of {name}")
        vs = []
        for _ in range(k):
            if p.peek() == "}":
                raise p.error(f"a value of {name} has {len(vs)} numbers, expected {k}")
            vs.append(p.number(f"a number in a value of {name}"))
        p.expect("}", f"'}}' after {k} numbers of a value of {name}")
        return vs

    at = p.i
    r = 0
    while p.peek() != "}":
        if r >= MAX_KEYS:
            raise p.error(f"{name} holds more than {MAX_KEYS} keys")
        frames.append(p.integer(f"the frame of key {r} of {name} or '}}'", I32_MIN, (1 << 31) - 1))
        parts[0].append(value())
        if tangents:
            p.expect("InTan", f"InTan for key {r} of {name}")
            parts[1].append(value())
            p.expect("OutTan", f"OutTan for key {r} of {name}")
            parts[2].append(value())
        r += 1
    p.i += 1
    if r != n:  # real files have this (zengfanfan !RibbonEmitter.mdl); the keys themselves are unambiguous
        p.diag(f"{name} declares {n} keys but holds {r}; loaded {r}", at)
    n = r
    out = [np.array(frames, dtype=np.int64)]
    for vals in parts:
        if base == "<u4":
            out.append(np.array(vals, dtype=np.uint32).reshape((n, k) if k > 1 else (n,)))
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                out.append(np.array(vals, dtype=np.float64).astype(np.float32).reshape((n, k) if k > 1 else (n,)))
    return out


def write_track(out: Out, name: str, t: Track) -> None:
    keys = t.keys
    n = len(keys)
    interp = t.interpolation
    base, k = TRACK_TYPES.get(t.tag, ("<f4", 1))
    out.open(f"{name} {n}")
    out.line(INTERPOLATIONS[interp] + "," if 0 <= interp < 4 else "Linear,")
    if t.global_sequence_id != -1:
        out.line(f"GlobalSeqId {int(t.global_sequence_id)},")
    if n:
        fmt = fmt_ints if base == "<u4" else fmt_floats
        ind = "\t" * out.depth
        vt = "{ " + ", ".join(["%s"] * k) + " }" if k > 1 else "%s"
        tpl = ind + "%s: " + vt + ",\n"
        cols = [fmt_ints(keys["frame"])]
        names = ["value", "in_tan", "out_tan"] if interp >= 2 else ["value"]
        for field in names:
            s = fmt(keys[field])
            cols += [s[c::k] for c in range(k)]
        if interp >= 2:
            tpl += ind + "\tInTan " + vt + ",\n" + ind + "\tOutTan " + vt + ",\n"
        args = [a for row in zip(*cols, strict=True) for a in row]
        out.raw((tpl * n) % tuple(args))
    out.close()
