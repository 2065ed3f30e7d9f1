"""Read MDL text into a Model: dispatch the top-level blocks, then check indices across blocks."""

from __future__ import annotations

import numpy as np

from renderer.errors import Diagnostic, FormatError
from renderer.model import Model

from . import header
from .geosets import read_geoset, read_geoset_animation
from .materials import read_materials, read_texture_animations
from .nodes import NODE_BLOCKS, read_node
from .tokens import Parser

TOP_LEVEL = {
    "Version": header.read_version,
    "Model": header.read_model_info,
    "Sequences": header.read_sequences,
    "GlobalSequences": header.read_global_sequences,
    "Textures": header.read_textures,
    "SoundTracks": header.read_sound_tracks,
    "Materials": read_materials,
    "TextureAnims": read_texture_animations,
    "PivotPoints": header.read_pivots,
    "BindPose": header.read_bind_pose,
    "FaceFX": header.read_face_effect,
}
VERSION_DEPENDENT = frozenset({"Materials", "Geoset", "Light"})


def read_mdl_bytes(data: bytes, path: str = "<bytes>", *, strict: bool = False, check_indices: bool = True,
                   resolver=None) -> Model:
    """Parse MDL file bytes (UTF-8, an optional BOM; undecodable bytes kept as surrogates): the
    renderer.formats reader contract (an MDL refers to nothing while it loads: `resolver` unused)."""
    text = data.decode("utf-8", "surrogateescape")
    if text.startswith("\ufeff"):
        text = text[1:]
    return read_mdl(text, path, strict=strict, check_indices=check_indices)


def read_mdl(text: str, path: str = "<text>", strict: bool = False, check_indices: bool = True) -> Model:
    """Parse MDL text.

    Syntax errors, wrong counts and values out of range raise `FormatError` with the line and
    column. Indices that point past what they index raise too unless `check_indices` is False, when
    they become diagnostics. `strict` turns every diagnostic into an error.
    """
    p = Parser(text, path)
    model = Model(path=path)
    model.format = "mdl"
    try:
        starts = _read_blocks(p, model)
    except FormatError:
        raise
    except RecursionError:
        raise p.error("blocks nested too deeply") from None
    except (ValueError, TypeError, IndexError, KeyError, OverflowError, AttributeError) as e:  # a reader bug
        raise p.error(f"internal error while reading ({type(e).__name__}: {e})") from e
    model.diagnostics.extend(p.diagnostics)
    problems = _validate(p, model, starts)
    if problems:
        if check_indices:
            raise problems[0]
        model.diagnostics.extend(Diagnostic(e.where, e.offset, e.problem, e.unit) for e in problems)
    if strict and model.diagnostics:
        d = model.diagnostics[0]
        raise FormatError(path, d.where, d.offset, f"{d.message} (strict mode)", unit=d.unit)
    return model


def _read_blocks(p: Parser, model: Model) -> dict:
    starts: dict = {"Geoset": [], "Materials": [], "GeosetAnim": [], "missing_ids": []}
    seen_version = False
    seen_other: str | None = None
    while p.i < p.n:
        at = p.i
        kw = p.ident("a top-level block (Version, Model, Sequences, Materials, Geoset, Bone, ...)")
        if kw == "Version":
            if seen_other is not None:
                p.diag(f"Version comes after {seen_other}, which was read as version {model.version}", at)
            seen_version = True
        elif kw in VERSION_DEPENDENT and not seen_version and seen_other is None:
            seen_other = kw
        fn = TOP_LEVEL.get(kw)
        if fn is not None:
            if kw == "Materials":
                starts["Materials"].append((at, len(model.materials)))
            fn(p, model)
        elif kw == "Geoset":
            read_geoset(p, model)
            starts["Geoset"].append(at)
        elif kw == "GeosetAnim":
            starts["GeosetAnim"].append(at)
            read_geoset_animation(p, model)
        elif kw in NODE_BLOCKS:
            obj, st, start = read_node(p, model, kw)
            if kw != "Camera" and "ObjectId" not in st.seen:
                starts["missing_ids"].append((obj, start))
        else:
            raise p.error(f"{kw!r} is not a top-level MDL block", at)
    if not seen_version:
        p.diag("no Version block; assuming FormatVersion 800", 0)
    if starts["missing_ids"]:
        nodes = model.nodes()
        for obj, start in starts["missing_ids"]:
            obj.object_id = next(i for i, n in enumerate(nodes) if n is obj)
            p.diag(f"{obj.name!r} has no ObjectId; using its position among the nodes, {obj.object_id}", start)
    return starts


def _validate(p: Parser, m: Model, starts: dict) -> list[FormatError]:
    """Cross-block index checks (the same as the MDX reader's), each naming its block."""
    problems: list[FormatError] = []

    def fail(at: int, problem: str) -> None:
        problems.append(p.error(problem, at))

    geo_at = starts["Geoset"]
    for i, g in enumerate(m.geosets):
        at = geo_at[i] if i < len(geo_at) else 0
        p.where = [f"Geoset {i}"]
        nv = len(g.vertices)
        if len(g.normals) != nv:
            fail(at, f"Normals has {len(g.normals)} normals for {nv} vertices")
        if len(g.faces) and int(g.faces.max()) >= nv:
            bad = int(np.argmax(g.faces >= nv))
            fail(at, f"face index {bad} is vertex {int(g.faces[bad])}, past the {nv} vertices")
        if int(np.asarray(g.face_counts).sum(dtype=np.int64)) > len(g.faces):
            fail(at, "face groups add up to more indices than Faces holds")
        if len(g.vertex_groups) and g.skin is None:
            if len(g.vertex_groups) != nv:
                fail(at, f"VertexGroup has {len(g.vertex_groups)} entries for {nv} vertices")
            elif int(g.vertex_groups.max()) >= len(g.matrix_group_sizes):
                bad = int(np.argmax(g.vertex_groups >= len(g.matrix_group_sizes)))
                fail(at, f"VertexGroup entry {bad} names matrix group {int(g.vertex_groups[bad])}, past the "
                         f"{len(g.matrix_group_sizes)} groups")
        if int(np.asarray(g.matrix_group_sizes).sum(dtype=np.int64)) != len(g.matrix_indices):
            fail(at, "matrix group sizes do not add up to the matrix indices")
        if g.skin is not None and len(g.skin) != nv:
            fail(at, f"SkinWeights has {len(g.skin)} entries for {nv} vertices")
        for j, uv in enumerate(g.uv_sets):
            if len(uv) != nv:
                fail(at, f"TVertices set {j} has {len(uv)} coordinates for {nv} vertices")
        if m.materials and not 0 <= g.material_id < len(m.materials):
            fail(at, f"MaterialID {g.material_id} names a material past the {len(m.materials)} materials")
        if len(g.matrix_indices):
            ids = {n.object_id for n in m.nodes()}
            missing = sorted(set(np.unique(g.matrix_indices).tolist()) - ids)
            if missing:
                fail(at, f"Groups names node {missing[0]}, but no node has that ObjectId")
    p.where = []
    ntex = len(m.textures)
    mat_at = starts["Materials"]
    for i, mat in enumerate(m.materials):
        at = max((a for a, first in mat_at if first <= i), default=0)
        for j, layer in enumerate(mat.layers):
            ids = [layer.texture_id] + [s.texture_id for s in layer.textures]
            for t in [layer.tracks.get("KMTF")] + [s.texture_track for s in layer.textures]:
                if t is not None and len(t.keys):
                    ids.append(int(t.values.max()))
            for tid in ids:
                if not 0 <= tid < ntex:
                    p.where = [f"Material {i}", f"Layer {j}"]
                    fail(at, f"texture id {tid} names a texture past the {ntex} textures")
                    break
    p.where = []
    for i, ga in enumerate(m.geoset_animations):
        if not 0 <= ga.geoset_id < len(m.geosets) and ga.geoset_id != 0xFFFFFFFF:
            ga_at = starts["GeosetAnim"]
            fail(ga_at[i] if i < len(ga_at) else 0,
                 f"GeosetAnim {i} names geoset {ga.geoset_id}, but the model has {len(m.geosets)}")
    return problems
