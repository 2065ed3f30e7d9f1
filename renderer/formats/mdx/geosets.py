"""GEOS: geosets. Sub-chunks in a fixed order, each a tag and a count; arrays are numpy views.

VRTX NRMS PTYP PCNT PVTX GNDX MTGC MATS, material/selection fields, (900+) lod and lod name,
extent and per-sequence extents, optional TANG and SKIN (probed by tag), UVAS with UVBS sets.
"""

from __future__ import annotations

import struct

import numpy as np

from renderer.errors import FormatError
from renderer.model import Extent, Geoset

from .binary import MAX_COUNT, Reader, append_sized, encode_fixed, fixed_string

U32 = struct.Struct("<I")
EXTENT = struct.Struct("<7f")
SELECTION = struct.Struct("<III")

# (attribute, tag, dtype, components per element)
ARRAYS = (
    ("vertices", "VRTX", "<f4", 3),
    ("normals", "NRMS", "<f4", 3),
    ("face_types", "PTYP", "<u4", 1),
    ("face_counts", "PCNT", "<u4", 1),
    ("faces", "PVTX", "<u2", 1),
    ("vertex_groups", "GNDX", "u1", 1),
    ("matrix_group_sizes", "MTGC", "<u4", 1),
    ("matrix_indices", "MATS", "<u4", 1),
)


def _extent(v) -> Extent:
    return Extent(v[0], v[1:4], v[4:7])


TAG_COUNT = struct.Struct("<4sI")


def _sub_array(r: Reader, tag: str, dtype: str, k: int) -> tuple[np.ndarray, int]:
    """A tagged, counted sub-chunk read with one unpack and one bounds check (the hot path)."""
    at = r.pos
    if r.end - at < 8:
        r.need(8, f"{tag} tag and count")
    got, n = TAG_COUNT.unpack_from(r.buf, at)
    if got != _TAGS[tag]:
        raise r.error(f"expected sub-chunk {tag}, found {got.decode('latin-1')!r}", at)
    dt = _DTYPES[dtype]
    size = n * dt.itemsize * k
    if n > MAX_COUNT or size > r.end - at - 8:
        raise r.error(f"{tag} count {n} needs {size} bytes but only {r.end - at - 8} remain", at + 4)
    a = np.frombuffer(r.buf, dt, n * k, at + 8)
    r.pos = at + 8 + size
    return (a.reshape(n, k) if k > 1 else a), at


_TAGS = {t: t.encode() for t in ("VRTX", "NRMS", "PTYP", "PCNT", "PVTX", "GNDX", "MTGC", "MATS", "TANG", "SKIN",
                                  "UVBS")}
_DTYPES = {d: np.dtype(d) for d in ("<f4", "<u4", "<u2", "u1")}


def read_geoset(r: Reader, version: int) -> tuple[Geoset, dict[str, int], list[FormatError]]:
    """Returns the geoset, the byte offsets of its index arrays and any index-range problems."""
    start = r.pos
    gr = r.inclusive("geoset")
    g = Geoset()
    offsets: dict[str, int] = {"geoset": start}
    for attr, tag, dtype, k in ARRAYS:
        a, at = _sub_array(gr, tag, dtype, k)
        setattr(g, attr, a)
        offsets[tag] = at
    g.material_id, g.selection_group, g.selection_flags = gr.unpack(SELECTION, "material and selection")
    offsets["material"] = gr.pos - SELECTION.size
    if version > 800:
        g.lod = gr.u32("level of detail")
        g.lod_name = fixed_string(gr.raw(80, "level of detail name"))
    g.extent = _extent(gr.unpack(EXTENT, "geoset extent"))
    n = gr.count("sequence extent", EXTENT.size)
    ext = gr.array("<f4", n * 7, "sequence extents").reshape(n, 7)
    g.sequence_extents = [_extent(row) for row in ext.tolist()]
    if gr.peek_tag() == "TANG":
        g.tangents, _ = _sub_array(gr, "TANG", "<f4", 4)
    if gr.peek_tag() == "SKIN":
        at = gr.pos
        skin, _ = _sub_array(gr, "SKIN", "u1", 1)
        if len(skin) % 8:
            raise gr.error(f"SKIN holds {len(skin)} bytes, not a multiple of 8 (4 bones + 4 weights)", at)
        g.skin = skin.reshape(-1, 8)
        offsets["SKIN"] = at
    gr.expect_tag("UVAS")
    nsets = gr.count("UV set", 8)
    for _ in range(nsets):
        uv, _ = _sub_array(gr, "UVBS", "<f4", 2)
        g.uv_sets.append(uv)
    g.extra = gr.rest()
    return g, offsets, index_problems(gr, g, offsets)


def index_problems(r: Reader, g: Geoset, offsets: dict[str, int]) -> list[FormatError]:
    """Every index in the geoset that points past what it indexes, as errors (not raised)."""
    problems: list[FormatError] = []
    try:
        _check_indices(r, g, offsets)
    except FormatError as e:
        problems.append(e)
    return problems


def _check_indices(r: Reader, g: Geoset, offsets: dict[str, int]) -> None:
    nv = len(g.vertices)
    if len(g.normals) != nv:
        raise r.error(f"NRMS has {len(g.normals)} normals for {nv} vertices", offsets["NRMS"])
    if len(g.faces) and int(g.faces.max()) >= nv:
        bad = int(np.argmax(g.faces >= nv))
        raise r.error(
            f"PVTX index {bad} is vertex {int(g.faces[bad])}, past the {nv} vertices", offsets["PVTX"]
        )
    if int(g.face_counts.sum(dtype=np.int64)) > len(g.faces):
        raise r.error(
            f"PCNT groups add up to {int(g.face_counts.sum())} indices but PVTX holds {len(g.faces)}",
            offsets["PCNT"],
        )
    if len(g.vertex_groups) and g.skin is None:  # SKIN geosets carry unused GNDX bytes
        if len(g.vertex_groups) != nv:
            raise r.error(f"GNDX has {len(g.vertex_groups)} entries for {nv} vertices", offsets["GNDX"])
        if int(g.vertex_groups.max()) >= len(g.matrix_group_sizes):
            bad = int(np.argmax(g.vertex_groups >= len(g.matrix_group_sizes)))
            raise r.error(
                f"GNDX entry {bad} names matrix group {int(g.vertex_groups[bad])}, "
                f"past the {len(g.matrix_group_sizes)} groups in MTGC",
                offsets["GNDX"],
            )
    total = int(g.matrix_group_sizes.sum(dtype=np.int64))
    if total != len(g.matrix_indices):
        raise r.error(
            f"MTGC groups need {total} matrix indices but MATS holds {len(g.matrix_indices)}", offsets["MATS"]
        )
    if g.skin is not None and len(g.skin) != nv:
        raise r.error(f"SKIN has {len(g.skin)} entries for {nv} vertices", offsets["SKIN"])
    for i, uv in enumerate(g.uv_sets):
        if len(uv) != nv:
            raise r.error(f"UV set {i} has {len(uv)} coordinates for {nv} vertices", offsets["geoset"])


def write_geoset(g: Geoset, version: int, out: list) -> None:
    body: list = []
    for attr, tag, dtype, _ in ARRAYS:
        a = np.ascontiguousarray(getattr(g, attr), dtype=dtype)
        body.append(tag.encode() + U32.pack(len(a)))
        body.append(a.tobytes())
    body.append(SELECTION.pack(g.material_id, g.selection_group, g.selection_flags))
    if version > 800:
        body.append(U32.pack(g.lod))
        body.append(encode_fixed(g.lod_name, 80, "level of detail name"))
    body.append(_pack_extent(g.extent))
    body.append(U32.pack(len(g.sequence_extents)))
    body.extend(_pack_extent(e) for e in g.sequence_extents)
    if g.tangents is not None:
        t = np.ascontiguousarray(g.tangents, "<f4")
        body.append(b"TANG" + U32.pack(len(t)) + t.tobytes())
    if g.skin is not None:
        s = np.ascontiguousarray(g.skin, "u1")
        body.append(b"SKIN" + U32.pack(s.size) + s.tobytes())
    body.append(b"UVAS" + U32.pack(len(g.uv_sets)))
    for uv in g.uv_sets:
        uv = np.ascontiguousarray(uv, "<f4")
        body.append(b"UVBS" + U32.pack(len(uv)) + uv.tobytes())
    body.append(g.extra)
    append_sized(out, body)


def _pack_extent(e: Extent) -> bytes:
    return EXTENT.pack(e.radius, *e.min, *e.max)
