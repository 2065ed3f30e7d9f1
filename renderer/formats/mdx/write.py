"""Write a Model as MDX bytes: chunks in the model's own layout, then anything it did not cover."""

from __future__ import annotations

import struct

import numpy as np

from renderer.model import Model

from . import layouts as L
from .binary import append_sized
from .chunks import CANONICAL_ORDER, FIXED_CHUNKS, RECORD_CHUNKS
from .records import FIXED_RECORDS

U32 = struct.Struct("<I")


def write_mdx(model: Model) -> bytes:
    out: list = [b"MDLX"]
    used: dict[str, int] = {}  # records of each chunk's list already written
    unknown = iter(model.unknown_chunks)
    for tag, count in model.layout:
        if count < 0:
            chunk = next(unknown)
            out.append(chunk.tag.encode("latin-1") + U32.pack(len(chunk.data)) + chunk.data)
            continue
        _chunk(model, tag, used, count, out)
    written = {tag for tag, _ in model.layout}
    for tag in CANONICAL_ORDER:
        if tag in ("VERS", "MODL"):
            if tag not in written:
                _chunk(model, tag, used, 1, out)
        elif _total(model, tag) > used.get(tag, 0):
            _chunk(model, tag, used, None, out)
    for chunk in unknown:  # unknown chunks added without a layout entry
        out.append(chunk.tag.encode("latin-1") + U32.pack(len(chunk.data)) + chunk.data)
    out.append(model.trailing)
    return b"".join(out)


def _total(model: Model, tag: str) -> int:
    if tag in RECORD_CHUNKS:
        return len(getattr(model, RECORD_CHUNKS[tag].attr))
    if tag in FIXED_CHUNKS:
        return len(getattr(model, FIXED_CHUNKS[tag]))
    if tag == "GLBS":
        return len(model.global_sequences)
    if tag == "PIVT":
        return len(model.pivots)
    if tag == "BPOS":
        return 0 if model.bind_pose is None else len(model.bind_pose)
    return 0


def _chunk(model: Model, tag: str, used: dict[str, int], count: int | None, out: list) -> None:
    start = used.get(tag, 0)
    stop = None if count is None else start + count
    body: list = []
    v = model.version
    if tag == "VERS":
        body.append(U32.pack(v))
    elif tag == "MODL":
        body.append(L.MODEL_INFO.pack(model))
        body.append(model.model_extra)
    elif tag in FIXED_CHUNKS:
        _, layout, _ = FIXED_RECORDS[tag]
        for obj in getattr(model, FIXED_CHUNKS[tag])[start:stop]:
            body.append(layout.pack(obj))
        stop = start + len(body)
    elif tag == "GLBS":
        vals = model.global_sequences[start:stop]
        body.append(np.asarray(vals, "<u4").tobytes())
        stop = start + len(vals)
    elif tag == "PIVT":
        piv = np.ascontiguousarray(model.pivots[start:stop], "<f4")
        body.append(piv.tobytes())
        stop = start + len(piv)
    elif tag == "BPOS":
        bp = model.bind_pose if model.bind_pose is not None else np.zeros((0, 12), "<f4")
        mats = np.ascontiguousarray(bp[start:stop], "<f4")
        body.append(U32.pack(len(mats)) + mats.tobytes())
        stop = start + len(mats)
    else:
        spec = RECORD_CHUNKS[tag]
        records = getattr(model, spec.attr)[start:stop]
        for obj in records:
            spec.write(obj, v, body)
        stop = start + len(records)
    used[tag] = stop if stop is not None else start
    append_sized(out, body, tag.encode("latin-1"), inclusive=False)
