"""Skinning: per-geoset matrix palettes for the GPU, and a separate CPU reference.

Every geoset is reduced to one form the vertex shader runs: per vertex four palette indices and four
weights, position' = (sum_k w_k P[i_k]) @ [position, 1], normal' = normalize(upper 3x3 @ normal).

* Matrix groups (GNDX -> MTGC -> MATS, classic models): the palette holds one matrix per matrix
  group, the equal-weight average of its bones' world matrices (any group size, also > 4 bones; the
  average of the matrices is the average of the transformed positions, as both are linear). Each
  vertex uses index (GNDX[v], 0, 0, 0) with weights (1, 0, 0, 0). The palette has one extra last
  row, the identity, used by vertices whose group index names no group (e.g. 255, "not attached").
  An empty group (size 0) is the identity. MATS entries are node object ids, mapped once to skeleton
  rows (`Skeleton.ids`; an id no node has -> the identity row).
* SKIN (Reforged): 4 bone indices (u8) and 4 weights (u8, w / 255). The bone indices are node object
  ids, the same index space as MATS entries, not positions in the geoset's MATS list: the viewer's HD
  shader looks them up directly in its node matrix texture, the viewer's and HiveWE's sanity checks
  test them against the node list ("attached to object N which does not exist / is not a bone"),
  mapped once to skeleton rows like MATS. (In the corpus files that have SKIN, Girl2 and HarvestGolem,
  every geoset's MATS is 0..bones-1 and bones take object ids 0..bones-1, so both readings agree
  there.) The palette is the node palette: all world matrices by skeleton row plus one identity row at
  index N. Weights are used as stored (not renormalised), like the viewer.
* Float weights (Halo: `bone_indices` node object ids + `bone_weights`): as SKIN.
* An index that names no node, or one with zero weight, points at the identity row. A vertex whose
  weights sum to 0 gets the identity (index N, weight 1): it stays in bind pose.

Priority when a geoset has several: SKIN (when it has one row per vertex), then float weights, then
matrix groups. Palettes are float64; the GL layer converts them on upload.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from renderer.anim.skeleton import dense_rows
from renderer.model import Geoset, Model


@dataclass(eq=False)
class GeosetSkin:
    """The static part of a geoset's skinning, in the 4-index form the shader runs."""

    kind: str  # "groups" | "skin" | "weights"
    bone_indices: np.ndarray  # (n, 4) int32, into this geoset's palette
    bone_weights: np.ndarray  # (n, 4) float32
    palette_size: int  # rows of this geoset's palette (groups + 1, or nodes + 1)
    # matrix-group form only
    vertex_groups: np.ndarray | None = None  # (n,) int32 palette row per vertex
    group_sizes: np.ndarray | None = None  # (G,) bones actually used per group
    group_members: np.ndarray | None = None  # flattened skeleton rows (invalid ids -> N, the identity row)
    notes: list[str] = field(default_factory=list)


def _identity_weights(n: int, identity: int):
    idx = np.zeros((n, 4), np.int32)
    idx[:, 0] = identity
    w = np.zeros((n, 4), np.float32)
    w[:, 0] = 1.0
    return idx, w


def _weighted(indices: np.ndarray, weights: np.ndarray, ids: np.ndarray, kind: str, notes) -> GeosetSkin:
    node_count = len(ids)
    indices = np.asarray(indices, np.int64).reshape(-1, 4)
    weights = np.asarray(weights, np.float32).reshape(-1, 4)
    rows = dense_rows(ids, indices)
    bad = rows == node_count
    used_bad = bad & (weights != 0)
    if used_bad.any():
        ids = sorted(set(indices[used_bad].tolist()))[:8]
        notes.append(f"{kind}: {int(used_bad.sum())} weighted bone index(es) name no node {ids}; identity used")
    idx = np.where(bad | (weights == 0), node_count, rows).astype(np.int32)
    w = weights.copy()
    zero = w.sum(axis=1) == 0
    if zero.any():
        notes.append(f"{kind}: {int(zero.sum())} vertex(es) with weights summing to 0 stay in bind pose")
        zi, zw = _identity_weights(int(zero.sum()), node_count)
        idx[zero], w[zero] = zi, zw
    return GeosetSkin(kind.lower(), idx, w, node_count + 1, notes=notes)


def geoset_skin(geoset: Geoset, ids) -> GeosetSkin:
    """The static skinning data of one geoset for a skeleton whose rows have object ids `ids`
    (sorted; `Skeleton.ids`, N = len(ids) rows), or of a node count N for object ids 0..N-1."""
    ids = np.arange(int(ids)) if isinstance(ids, (int, np.integer)) else np.asarray(ids, np.int64)
    node_count = len(ids)
    n = len(geoset.vertices)
    notes: list[str] = []
    skin = geoset.skin
    if skin is not None and len(skin):
        skin = np.asarray(skin).reshape(-1, 8) if np.asarray(skin).size % 8 == 0 else None
        if skin is not None and len(skin) == n:
            return _weighted(skin[:, :4], skin[:, 4:].astype(np.float32) / 255.0, ids, "SKIN", notes)
        notes.append("SKIN does not have one row per vertex; ignored")
    if geoset.bone_indices is not None and geoset.bone_weights is not None:
        bi, bw = np.asarray(geoset.bone_indices), np.asarray(geoset.bone_weights)
        if bi.size == 4 * n and bw.size == 4 * n:
            return _weighted(bi, bw, ids, "weights", notes)
        notes.append("bone_indices/bone_weights do not have one row per vertex; ignored")

    sizes = np.asarray(geoset.matrix_group_sizes, np.int64).reshape(-1)
    mats = np.asarray(geoset.matrix_indices, np.int64).reshape(-1)
    sizes = np.maximum(sizes, 0)
    bounds = np.cumsum(sizes)
    starts = np.minimum(bounds - sizes, len(mats))
    ends = np.minimum(bounds, len(mats))
    used = ends - starts
    if int(sizes.sum()) > len(mats):
        notes.append(f"MTGC sizes add up to {int(sizes.sum())} but MATS has {len(mats)} entries; groups truncated")
    members = np.concatenate([mats[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]) \
        if len(sizes) else np.zeros(0, np.int64)
    member_rows = dense_rows(ids, members)
    bad = member_rows == node_count
    if bad.any():
        notes.append(f"MATS: {int(bad.sum())} entr(ies) name no node {sorted(set(members[bad].tolist()))[:8]}; "
                     f"identity used")
    members = member_rows
    g = len(sizes)
    groups = np.asarray(geoset.vertex_groups, np.int64).reshape(-1)
    if len(groups) != n:
        notes.append(f"GNDX has {len(groups)} entries for {n} vertices; missing ones use the identity")
        groups = np.concatenate([groups[:n], np.full(max(0, n - len(groups)), g)])
    invalid = (groups < 0) | (groups >= g)
    if invalid.any():
        notes.append(f"GNDX: {int(invalid.sum())} vertex(es) name no matrix group; identity used")
    rows = np.where(invalid, g, groups).astype(np.int32)
    idx = np.zeros((n, 4), np.int32)
    idx[:, 0] = rows
    w = np.zeros((n, 4), np.float32)
    w[:, 0] = 1.0
    return GeosetSkin("groups", idx, w, g + 1, vertex_groups=rows, group_sizes=used,
                      group_members=members.astype(np.int64), notes=notes)


# Matrix groups of up to this many bones are summed by `PaletteBuilder` itself; larger ones (rare) go
# through np.add.reduceat, whose pairwise summation reorders the additions from 9 terms on.
_SEQUENTIAL_GROUP = 8


def group_sum(first: np.ndarray, rest: list[np.ndarray], out: np.ndarray) -> np.ndarray:
    """first + (rest[0] + rest[1] + ...), the rest added left to right, into `out`: bit for bit what
    np.add.reduceat gives for a segment [first, *rest] of at most 8 terms (it adds a segment's first
    element to numpy's pairwise sum of the others, and that is a plain left-to-right sum below 8
    terms)."""
    if not rest:
        out[...] = first
        return out
    if len(rest) == 1:
        return np.add(first, rest[0], out=out)
    np.add(rest[0], rest[1], out=out)
    for r in rest[2:]:
        out += r
    return np.add(first, out, out=out)


class PaletteBuilder:
    """Builds every geoset's palette from node world matrices, all geosets at once.

    A matrix group's row is the mean of its bones' node matrices: their sum (as np.add.reduceat sums
    them, `group_sum`) divided by the group size; every other row of a group palette (empty groups,
    the last row) is the identity. The groups are bucketed by size once, so a frame is one gather of
    every member, a few additions per group size and one gather that lays out all palettes. Every
    call returns new arrays: a kept Pose is not changed by later ones.
    """

    def __init__(self, skins: list[GeosetSkin], node_count: int):
        self.skins = skins
        self.node_count = n = node_count
        offsets, rows, members, sizes, dest = [], 0, [], [], []
        for s in skins:
            if s.kind != "groups":
                offsets.append(None)
                continue
            offsets.append(rows)
            nonempty = np.flatnonzero(s.group_sizes > 0)
            dest.append(rows + nonempty)
            sizes.append(s.group_sizes[nonempty])
            members.append(s.group_members)
            rows += s.palette_size
        self.offsets = offsets
        self.rows = rows
        members = np.concatenate(members).astype(np.int64) if members else np.zeros(0, np.int64)
        sizes = np.concatenate(sizes).astype(np.int64) if sizes else np.zeros(0, np.int64)
        dest = np.concatenate(dest).astype(np.int64) if dest else np.zeros(0, np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if len(sizes) \
            else np.zeros(0, np.int64)
        # Per frame a source array holds the node palette (rows 0..n, n = the identity) and then one
        # row per summed group; `layout` names the source row of every palette row.
        layout = np.full(rows, n, np.int64)
        gather, self.classes, at, row = [], [], 0, n + 1
        for k in np.unique(sizes).tolist():
            sel = np.flatnonzero(sizes == k)
            table = members[starts[sel, None] + np.arange(k)]  # (G, k)
            if k == 1:
                layout[dest[sel]] = table[:, 0]  # a group of one is its matrix (x / 1 is x)
            elif k <= _SEQUENTIAL_GROUP:
                gather.append(table.T.reshape(-1))  # column by column: each bone slot contiguous
                self.classes.append((k, len(sel), at, row))
                layout[dest[sel]] = row + np.arange(len(sel))
                at += k * len(sel)
                row += len(sel)
        self.gather = np.concatenate(gather) if gather else np.zeros(0, np.int64)
        big = np.flatnonzero(sizes > _SEQUENTIAL_GROUP)
        self.big_members = np.concatenate([members[starts[i]:starts[i] + sizes[i]] for i in big.tolist()]) \
            if len(big) else np.zeros(0, np.int64)
        self.big_sizes = sizes[big].astype(np.float64)
        self.big_starts = np.concatenate([[0], np.cumsum(sizes[big])[:-1]]).astype(np.int64) if len(big) \
            else np.zeros(0, np.int64)
        self.big_row = row
        layout[dest[big]] = row + np.arange(len(big))
        self.source_rows = row + len(big)
        self.layout = layout

    def _source(self, node_matrices: np.ndarray) -> np.ndarray:
        """(source_rows, 4, 4): the node matrices by skeleton row, the identity row, then the group
        sums to come (unset)."""
        n = self.node_count
        src = np.empty((self.source_rows, 4, 4))
        src[:n] = node_matrices
        src[n] = np.eye(4)
        return src

    def build(self, node_matrices: np.ndarray) -> list[np.ndarray]:
        src = self._source(node_matrices)
        nodes = src[:self.node_count + 1]
        flat = src.reshape(-1, 16)
        if self.classes:
            bones = flat.take(self.gather, axis=0)
            for k, count, at, row in self.classes:
                slots = bones[at:at + k * count].reshape(k, count, 16)
                mean = group_sum(slots[0], list(slots[1:]), flat[row:row + count])
                mean /= k
        if len(self.big_members):
            sums = np.add.reduceat(nodes[self.big_members], self.big_starts, axis=0)
            src[self.big_row:] = sums / self.big_sizes[:, None, None]
        buf = flat.take(self.layout, axis=0).reshape(-1, 4, 4)
        out = []
        for s, off in zip(self.skins, self.offsets, strict=True):
            out.append(nodes if off is None else buf[off:off + s.palette_size])
        return out


def skin_with_palette(palette: np.ndarray, skin: GeosetSkin, vertices, normals):
    """What the vertex shader computes, on the CPU: (positions, normals) from a palette."""
    m = np.einsum("nk,nkij->nij", skin.bone_weights.astype(np.float64), palette[skin.bone_indices])
    return _apply(m, vertices, normals)


def _apply(m, vertices, normals):
    v = np.asarray(vertices, np.float64)
    nr = np.asarray(normals, np.float64)
    pos = np.einsum("nij,nj->ni", m[:, :3, :3], v) + m[:, :3, 3]
    nrm = np.einsum("nij,nj->ni", m[:, :3, :3], nr) if len(nr) == len(v) else np.zeros_like(pos)
    length = np.linalg.norm(nrm, axis=1, keepdims=True)
    nrm = np.divide(nrm, length, out=np.zeros_like(nrm), where=length > 0)
    return pos, nrm


# ----------------------------------------------------------------------------- CPU reference


def skin_vertices(model: Model, geoset_index: int, node_matrices, node_ids=None) -> tuple[np.ndarray, np.ndarray]:
    """Reference skinning, straight from the geoset's own arrays, for tests of the palette and GPU paths.
    `node_matrices` row i is the node with object id `node_ids[i]` (default: the model's distinct
    non-negative object ids, sorted, as the skeleton's rows, when there are as many as rows;
    otherwise row i is object id i). It shares no code with them and blends transformed positions
    (the definition) where they blend matrices: matrix groups = the mean over the group's bones of
    bone @ vertex; weights = the weighted sum of bone @ vertex. Returns positions (n, 3) and
    renormalised normals (n, 3); the same rules for unusable indices as the palette path (module
    docstring).
    """
    g = model.geosets[geoset_index]
    world = np.asarray(node_matrices, np.float64)
    if node_ids is None:
        node_ids = sorted({int(nd.object_id) for nd in model.nodes() if int(nd.object_id) >= 0})
        if len(node_ids) != len(world):
            node_ids = range(len(world))
    row_of = {int(oid): i for i, oid in enumerate(node_ids) if i < len(world)}
    v = np.asarray(g.vertices, np.float64).reshape(-1, 3)
    n = len(v)
    nr = np.asarray(g.normals, np.float64).reshape(-1, 3)
    if len(nr) != n:
        nr = np.zeros((n, 3))

    def moved(bone: int, rows):
        """Positions and normals of vertices `rows` moved by node `bone` (identity if no such node)."""
        if bone not in row_of:
            return v[rows], nr[rows]
        m = world[row_of[bone]]
        return v[rows] @ m[:3, :3].T + m[:3, 3], nr[rows] @ m[:3, :3].T

    pos = np.zeros((n, 3))
    nrm = np.zeros((n, 3))
    skin = None if g.skin is None else np.asarray(g.skin)
    if skin is not None and len(skin) and skin.size == 8 * n:
        skin = skin.reshape(n, 8)
        indices, weights = skin[:, :4].astype(np.int64), skin[:, 4:].astype(np.float64) / 255.0
        weighted = True
    elif g.bone_indices is not None and g.bone_weights is not None and np.asarray(g.bone_indices).size == 4 * n \
            and np.asarray(g.bone_weights).size == 4 * n:
        indices = np.asarray(g.bone_indices, np.int64).reshape(n, 4)
        weights = np.asarray(g.bone_weights, np.float64).reshape(n, 4)
        weighted = True
    else:
        weighted = False
    if weighted:
        for k in range(4):
            for bone in np.unique(indices[:, k]).tolist():
                rows = np.flatnonzero((indices[:, k] == bone) & (weights[:, k] != 0))
                if len(rows):
                    p, q = moved(bone, rows)
                    pos[rows] += weights[rows, k, None] * p
                    nrm[rows] += weights[rows, k, None] * q
        unweighted = np.flatnonzero(weights.sum(axis=1) == 0)
        pos[unweighted], nrm[unweighted] = v[unweighted], nr[unweighted]
    else:
        sizes = [int(x) for x in np.asarray(g.matrix_group_sizes).reshape(-1)]
        mats = [int(x) for x in np.asarray(g.matrix_indices).reshape(-1)]
        groups = np.asarray(g.vertex_groups, np.int64).reshape(-1)
        groups = np.concatenate([groups[:n], np.full(max(0, n - len(groups)), -1)])
        done = np.zeros(n, bool)
        at = 0
        for gi, size in enumerate(sizes):
            members = mats[at:at + size]
            at += size
            rows = np.flatnonzero(groups == gi)
            if not len(rows) or not members:
                continue
            for bone in members:
                p, q = moved(bone, rows)
                pos[rows] += p / len(members)
                nrm[rows] += q / len(members)
            done[rows] = True
        pos[~done], nrm[~done] = v[~done], nr[~done]
    length = np.sqrt(np.sum(nrm * nrm, axis=1))
    nrm = np.where(length[:, None] > 0, nrm / np.where(length > 0, length, 1.0)[:, None], 0.0)
    return pos, nrm
