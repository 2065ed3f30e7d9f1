"""Geosets and geoset animations. Geometry is read and written in bulk (numpy), never per vertex.

    Geoset {
        Vertices n { { x, y, z }, ... }
        Normals n { { x, y, z }, ... }
        TVertices n { { u, v }, ... }            (one block per UV set)
        VertexGroup { g, g, ... }                (matrix group of each vertex, GNDX)
        Tangents n { { x, y, z, w }, ... }       (900+)
        SkinWeights n { b0, b1, b2, b3, w0, w1, w2, w3, ... }   (900+; 8 per vertex; count optional)
        Faces <groups> <indices> { Triangles { { i, i, i, ... }, }, ... }
                                                 (one primitive block per face group: Points Lines
                                                  LineLoop LineStrip Triangles TriangleStrip
                                                  TriangleFan Quads QuadStrip Polygons, or PrimitiveN)
        Groups <groups> <indices> { Matrices { a, b }, ... }
        MinimumExtent { .. }, MaximumExtent { .. }, BoundsRadius r,
        Anim { MinimumExtent { .. }, MaximumExtent { .. }, BoundsRadius r, }   (per sequence)
        MaterialID 0, SelectionGroup 0, Unselectable,
        LevelOfDetail 0, Name "lod name",         (900+)
    }
    GeosetAnim { DropShadow, static Alpha 1 | Alpha track, static Color { .. } | Color track, GeosetId 0, }

Face and matrix-group data that do not add up (possible in broken MDX files loaded without index
checks) are written in an explicit form that keeps them exactly:
`Faces g n { Types { .. }, Counts { .. }, Indices { .. } }` and `Groups g n { Sizes { .. }, Indices { .. } }`.
"""

from __future__ import annotations

import numpy as np

from renderer.model import Extent, Geoset, GeosetAnimation

from .fields import Field, RecordState, Spec, emit, field_items, flag_items, read_named, read_record, write_record
from .header import EXTENT_FIELDS
from .text import Out, fmt_ints, int_rows_text, rows_text
from .tokens import I32_MIN, U32_END, Parser

PRIMITIVES = ("Points", "Lines", "LineLoop", "LineStrip", "Triangles", "TriangleStrip", "TriangleFan", "Quads",
              "QuadStrip", "Polygons")
PRIMITIVE_IDS = {w: i for i, w in enumerate(PRIMITIVES)}
MAX_ARRAY = 1 << 26

EXTENT = Spec(
    "Anim", Extent,
    (
        Field("MinimumExtent", "min", "vec3", omit_default=True),
        Field("MaximumExtent", "max", "vec3", omit_default=True),
        Field("BoundsRadius", "radius", "f", omit_default=True),
    ),
    flags_attr=None, named=False, label="geoset sequence extent",
)


def _count(p: Parser, what: str) -> int:
    return p.integer(f"the number of {what}", 0, MAX_ARRAY)


def _rows(p: Parser, g: Geoset, k: int, what: str) -> np.ndarray:
    p.where.append(what)
    n = _count(p, what)
    p.expect("{", f"'{{' to start {what}")
    arr = p.rows(n, k, what)
    p.where.pop()
    return arr


def _read_vertices(p, g, st, static):
    g.vertices = _rows(p, g, 3, "Vertices")


def _read_normals(p, g, st, static):
    g.normals = _rows(p, g, 3, "Normals")


def _read_uvs(p, g, st, static):
    g.uv_sets.append(_rows(p, g, 2, "TVertices"))


def _read_tangents(p, g, st, static):
    g.tangents = _rows(p, g, 4, "Tangents")


def _ints(p: Parser, what: str, lo: int, hi: int, count: int | None = None) -> np.ndarray:
    at = p.i
    arr = p.flat(what, "i", count)
    p.check_range(arr, lo, hi, what, at, flat=True)
    return arr


def _read_vertex_group(p, g, st, static):
    p.where.append("VertexGroup")
    p.expect("{", "'{' to start VertexGroup")
    g.vertex_groups = _ints(p, "VertexGroup", 0, 255).astype(np.uint8)
    p.where.pop()


def _read_skin(p, g, st, static):
    p.where.append("SkinWeights")
    at = p.i
    count = _count(p, "skin weight entries") if p.peek() != "{" else None
    p.expect("{", "'{' to start SkinWeights")
    if p.peek() == "{":  # rows of 8
        arr = p.rows(count if count is not None else _count_rows(p), 8, "SkinWeights", "i")
        p.check_range(arr, 0, 255, "SkinWeights", at)
    else:
        arr = _ints(p, "SkinWeights", 0, 255)
        if len(arr) % 8:
            raise p.error(f"SkinWeights holds {len(arr)} numbers, not 8 (4 bones and 4 weights) per vertex", at)
        if count is not None and count not in (len(arr) // 8, len(arr)):
            raise p.error(f"SkinWeights declares {count} entries but holds {len(arr) // 8} vertices "
                          f"({len(arr)} numbers)", at)
    g.skin = arr.reshape(-1, 8).astype(np.uint8)
    p.where.pop()


def _count_rows(p: Parser) -> int:
    """Rows `{ .. }` before the closing '}' of an uncounted block (cursor on the first row)."""
    n, i, toks = 0, p.i, p.toks
    while i < p.n and toks[i] == "{":
        try:
            i = toks.index("}", i) + 1
        except ValueError:
            break
        n += 1
    return n


def _read_faces(p, g, st, static):
    p.where.append("Faces")
    at = p.i
    ngroups = _count(p, "face groups")
    nindices = _count(p, "face indices")
    p.expect("{", "'{' to start Faces")
    types: list[int] = []
    parts: list[np.ndarray] = []
    explicit: dict[str, np.ndarray] = {}
    while not p.accept("}"):
        t = p.ident("a primitive type (Triangles, ...) or '}'")
        if t in ("Types", "Counts", "Indices"):
            p.expect("{", f"'{{' after {t}")
            hi = 65535 if t == "Indices" else U32_END - 1
            explicit[t] = _ints(p, f"Faces {t}", 0, hi)
            continue
        kind = PRIMITIVE_IDS.get(t)
        if kind is None and t.startswith("Primitive") and t[9:].isdigit():
            kind = int(t[9:])
        if kind is None or kind >= U32_END:
            raise p.error(f"{t!r} is not a primitive type ({', '.join(PRIMITIVES)})", p.i - 1)
        p.expect("{", f"'{{' after {t}")
        lists = []
        while not p.accept("}"):
            p.expect("{", f"'{{' to start a list of {t} indices")
            lists.append(_ints(p, f"{t} indices", 0, 65535))
        types.append(kind)
        parts.append(np.concatenate(lists) if lists else np.zeros(0, np.int64))
    if explicit:
        missing = {"Types", "Counts", "Indices"} - set(explicit)
        if missing or types:
            raise p.error("Faces in the explicit form needs Types, Counts and Indices and nothing else", at)
        ftypes, fcounts, faces = explicit["Types"], explicit["Counts"], explicit["Indices"]
    else:
        ftypes = np.array(types, np.int64)
        fcounts = np.array([len(a) for a in parts], np.int64)
        faces = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if len(ftypes) != ngroups:
        raise p.error(f"Faces declares {ngroups} face groups but holds {len(ftypes)}", at)
    if len(faces) != nindices:
        raise p.error(f"Faces declares {nindices} indices but holds {len(faces)}", at + 1)
    g.face_types = ftypes.astype("<u4")
    g.face_counts = fcounts.astype("<u4")
    g.faces = faces.astype("<u2")
    p.where.pop()


def _read_groups(p, g, st, static):
    p.where.append("Groups")
    at = p.i
    ngroups = _count(p, "matrix groups")
    nindices = _count(p, "matrix indices")
    p.expect("{", "'{' to start Groups")
    sizes: list[int] = []
    parts: list[np.ndarray] = []
    explicit: dict[str, np.ndarray] = {}
    while not p.accept("}"):
        t = p.ident("Matrices or '}'")
        if t not in ("Matrices", "Sizes", "Indices"):
            raise p.error(f"expected Matrices in Groups, found {t!r}", p.i - 1)
        p.expect("{", f"'{{' after {t}")
        arr = _ints(p, f"Groups {t}", I32_MIN, U32_END - 1) & 0xFFFFFFFF
        if t == "Matrices":
            sizes.append(len(arr))
            parts.append(arr)
        else:
            explicit[t] = arr
    if explicit:
        if set(explicit) != {"Sizes", "Indices"} or sizes:
            raise p.error("Groups in the explicit form needs Sizes and Indices and nothing else", at)
        gsizes, idx = explicit["Sizes"], explicit["Indices"]
    else:
        gsizes = np.array(sizes, np.int64)
        idx = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if len(gsizes) != ngroups:
        raise p.error(f"Groups declares {ngroups} matrix groups but holds {len(gsizes)}", at)
    if len(idx) != nindices:
        raise p.error(f"Groups declares {nindices} matrix indices but holds {len(idx)}", at + 1)
    g.matrix_group_sizes = gsizes.astype("<u4")
    g.matrix_indices = idx.astype("<u4")
    p.where.pop()


def _read_anim(p: Parser, g: Geoset, st: RecordState, static: bool) -> None:
    g.sequence_extents.append(read_named(p, EXTENT, st.version, len(g.sequence_extents))[0])


GEOSET_TAIL = (
    Field("MaterialID", "material_id", "u32"),
    Field("SelectionGroup", "selection_group", "u32"),
    Field("LevelOfDetail", "lod", "u32", min_version=900),
    Field("Name", "lod_name", "str", omit_default=True, min_version=900, size=80),
)
GEOSET = Spec(
    "Geoset", Geoset,
    EXTENT_FIELDS + GEOSET_TAIL,
    flags_attr="selection_flags", flags_word="SelectionFlags", flag_words=(("Unselectable", 4),),
    custom_read={
        "Vertices": _read_vertices, "Normals": _read_normals, "TVertices": _read_uvs,
        "VertexGroup": _read_vertex_group, "Tangents": _read_tangents, "SkinWeights": _read_skin,
        "Faces": _read_faces, "Groups": _read_groups, "Anim": _read_anim,
    },
    named=False, label="geoset",
)

GEOSET_ANIMATION = Spec(
    "GeosetAnim", GeosetAnimation,
    (
        Field("Alpha", "alpha", "f", "KGAO", omit_default=True),
        Field("Color", "color", "vec3", "KGAC", omit_default=True, force=lambda ga: bool(ga.flags & 2)),
        Field("GeosetId", "geoset_id", "u32none"),
    ),
    flag_words=(("DropShadow", 1),), implied=((2, "Color"),), named=False, label="geoset animation",
)


# -- reading ----------------------------------------------------------------------------------
def read_geoset(p: Parser, model) -> int:
    """Read one geoset into the model; returns the token index of its block (for later index errors)."""
    g = Geoset()
    start = p.i
    p.where.append(f"Geoset {len(model.geosets)}")
    read_record(p, GEOSET, g, model.version)
    p.where.pop()
    model.geosets.append(g)
    return start


def read_geoset_animation(p: Parser, model) -> None:
    model.geoset_animations.append(read_named(p, GEOSET_ANIMATION, model.version, len(model.geoset_animations))[0])


# -- writing ----------------------------------------------------------------------------------
def write_geoset(out: Out, g: Geoset, version: int, where: str) -> None:
    out.open("Geoset")
    ind = "\t" * (out.depth + 1)
    _array(out, "Vertices", g.vertices, 3, ind, always=True)
    _array(out, "Normals", g.normals, 3, ind)
    for uv in g.uv_sets:
        _array(out, "TVertices", uv, 2, ind, always=True)
    if len(g.vertex_groups):
        out.open("VertexGroup")
        out.raw(int_rows_text(np.asarray(g.vertex_groups).reshape(-1, 1), 1, ind, braces=False))
        out.close()
    if g.tangents is not None:
        _array(out, "Tangents", g.tangents, 4, ind, always=True)
    if g.skin is not None:
        skin = np.asarray(g.skin).reshape(-1, 8)
        out.open(f"SkinWeights {len(skin)}")
        out.raw(int_rows_text(skin, 8, ind, braces=False))
        out.close()
    if g.bone_indices is not None or g.bone_weights is not None:
        out.diag(where, "float bone indices/weights have no MDL form; not written")
    _write_faces(out, g)
    _write_groups(out, g)
    items = field_items(out, GEOSET, g, version, GEOSET.fields[:3])
    for i, e in enumerate(g.sequence_extents):
        items.append((None, lambda o, e=e, i=i: write_record(o, EXTENT, e, version, f"{where} extent {i}")))
    items += field_items(out, GEOSET, g, version, GEOSET.fields[3:])
    items += flag_items(out, GEOSET, g, set())
    emit(out, items)
    out.close()


def _array(out: Out, name: str, arr, k: int, ind: str, always: bool = False) -> None:
    a = np.asarray(arr).reshape(-1, k)
    if not len(a) and not always:
        return
    out.open(f"{name} {len(a)}")
    out.raw(rows_text(a, k, ind))
    out.close()


def _line(values) -> str:
    return "{ " + ", ".join(fmt_ints(values)) + " },"


def _write_faces(out: Out, g: Geoset) -> None:
    types, counts, faces = (np.asarray(a).ravel() for a in (g.face_types, g.face_counts, g.faces))
    if not (len(types) or len(faces)):
        return
    out.open(f"Faces {len(types)} {len(faces)}")
    if len(types) == len(counts) and int(counts.sum(dtype=np.int64)) == len(faces):
        at = 0
        for t, c in zip(types.tolist(), counts.tolist(), strict=True):
            out.open(PRIMITIVES[t] if t < len(PRIMITIVES) else f"Primitive{t}")
            out.line(_line(faces[at : at + c]))
            out.close()
            at += c
    else:
        out.line("Types " + _line(types))
        out.line("Counts " + _line(counts))
        out.line("Indices " + _line(faces))
    out.close()


def _write_groups(out: Out, g: Geoset) -> None:
    sizes, idx = np.asarray(g.matrix_group_sizes).ravel(), np.asarray(g.matrix_indices).ravel()
    if not (len(sizes) or len(idx)):
        return
    out.open(f"Groups {len(sizes)} {len(idx)}")
    if int(sizes.sum(dtype=np.int64)) == len(idx):
        ind = "\t" * out.depth
        parts = []
        at = 0
        for s in sizes.tolist():
            parts.append(ind + "Matrices " + _line(idx[at : at + s]) + "\n")
            at += s
        out.raw("".join(parts))
    else:
        out.line("Sizes " + _line(sizes))
        out.line("Indices " + _line(idx))
    out.close()


def write_geoset_animation(out: Out, ga: GeosetAnimation, version: int, where: str) -> None:
    write_record(out, GEOSET_ANIMATION, ga, version, where)
