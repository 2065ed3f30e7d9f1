"""Node world matrices (format reference §2.10 "Node transform").

Conventions
-----------
* Column vectors: a point p maps to M @ [p, 1]. Matrices are (4, 4) float64, row-major in numpy
  (m[:3, 3] is the translation). Z is up and models face +X (DESIGN.md).
* Nodes are indexed densely: row i is the node with the i-th smallest object id (`Skeleton.ids[i]`),
  N = the number of distinct object ids, whatever the ids' values (a model with object id 2^32 - 2
  has as many rows as one with ids 0..N-1; for ids 0..N-1 row i is object id i). `Skeleton.index`
  maps an object id to its row and `Skeleton.rows(object_ids)` maps many (N for an id no node has).
  Object ids never size anything. If two nodes share an object id, the first in `Model.nodes()`
  order is used (noted); a negative object id is ignored (noted). Cycles are broken at their
  smallest object id, and a node more than `MAX_DEPTH` levels below a root is treated as a root
  (both noted), so the depth of a hierarchy, which poses walk level by level, is bounded.
* The camera is a view matrix (world -> view, OpenGL: the camera looks down its -Z, +Y is screen up).
  Only its rotation and eye position are used. `view=None` means `DEFAULT_VIEW`, the auto camera's
  direction (azimuth 30, elevation 20 degrees, up +Z) looking at the origin.

Per node, with pivot c and sampled translation t, rotation r (normalised quaternion) and scale s:

    local = T(c) T(t) R(r) S(s) T(-c),   world = parentWorld @ local

which is exactly what runs for every node without special flags. Equivalently the world matrix of a
node is T(a) A T(-c): its pivot lands at a = parentWorld @ c + Lp t (Lp = the parent's 3x3 part) and
A = Lp R(r) S(s) is its linear part. Nodes with flags 0x1..0x80 use that form with the parent
replaced by an effective parent built from the parent's tracked world rotation Rp (the product of the
chain's rotations) and world scale Sp (the componentwise product of its scales), as the viewer tracks
them:

* DontInheritRotation (0x2) / DontInheritScaling (0x4) (`rules` names the bits): Lp becomes
  R(Rp') diag(Sp') with Rp' = identity when rotation is not inherited, Sp' = 1 when scaling is not.
  (Without either flag Lp is the parent's exact 3x3 part.)
* DontInheritTranslation (0x1): the parent does not move the node's pivot: a = c + Lp' t, i.e. the
  pivot stays where the bind pose puts it in model space (plus the node's own translation).
* Billboarded (0x8): the world rotation becomes B R(r) where B maps the node's +X to the direction
  toward the viewer (the view's +Z in world space), +Y to screen right and +Z to screen up (the
  viewer's camera-inverse rotation times its MDX basis change). Scale stays Sp' * s, the pivot
  position is inherited as usual. The direction is the view's, the same for every node (as the
  viewer does), not the direction to the eye.
* BillboardedLockX/Y/Z (0x10/0x20/0x40, ignored when 0x8 is set; X wins over Y over Z): the camera
  direction d (as above) is expressed in the node's frame, d' = (Rp' r)^-1 d, and the node turns
  about its own axis toward it: the local rotation becomes r * axis(angle) with angle =
  atan2(d'.z, d'.y) about X (its +Y then faces the camera; the node's local z scale is also negated,
  the Warsmash-derived fix the viewer carries), atan2(-d'.z, d'.x) about Y and atan2(d'.y, d'.x)
  about Z (its +X then faces the camera).
* CameraAnchored (0x80): no source renders it; we pin the node's pivot to the camera's eye position
  (a = eye + Lp' t). Rotation and scale are inherited as usual.

World rotation and scale (rotation Rp' r, or B r for billboards; scale Sp' * s) are tracked on every
node above a flagged node, where they are needed.

Every node is evaluated every frame (the viewer skips updating an emitter or attachment node while
its visibility is <= 0; that changes nothing visible, and `Pose.node_visibility` reports it).
`Skeleton.subset(rows)` evaluates only some rows and their ancestors, each bit for bit as here (the
effects simulation poses its emitters' nodes that way at every step).

Hierarchy: a parent id of -1 (0xFFFFFFFF) means no parent. Object ids are u32 and parent ids i32 in
MDX, so a parent id names the object id with the same 32-bit pattern (parent -2 is object id
0xFFFFFFFE). A parent id that names no node, or the node itself, makes the node a root (noted); a
cycle is broken by making its member with the smallest object id a root. Each case is noted in
`notes`. Nodes are evaluated level by level (all nodes of one depth at once), so there is no
recursion.
"""

from __future__ import annotations

import numpy as np

from renderer.anim import quat
from renderer.camera import look_at
from renderer.model import Model, Node
from renderer.rules import (
    NODE_FLAG_DONT_INHERIT_ROTATION,
    NODE_FLAG_DONT_INHERIT_SCALING,
    NODE_FLAG_DONT_INHERIT_TRANSLATION,
)

BILLBOARDED = 0x8
BILLBOARDED_LOCK_X = 0x10
BILLBOARDED_LOCK_Y = 0x20
BILLBOARDED_LOCK_Z = 0x40
CAMERA_ANCHORED = 0x80
SPECIAL_FLAGS = (NODE_FLAG_DONT_INHERIT_TRANSLATION | NODE_FLAG_DONT_INHERIT_ROTATION
                 | NODE_FLAG_DONT_INHERIT_SCALING | BILLBOARDED | BILLBOARDED_LOCK_X | BILLBOARDED_LOCK_Y
                 | BILLBOARDED_LOCK_Z | CAMERA_ANCHORED)


def _default_view() -> np.ndarray:
    az, el = np.radians(30.0), np.radians(20.0)
    d = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
    return look_at(d, (0.0, 0.0, 0.0))


DEFAULT_VIEW = _default_view()
MAX_DEPTH = 256  # levels below a root; real hierarchies are a few dozen deep (see Skeleton._cut_deep_chains)


class CameraFrame:
    """What billboards and camera anchors need from a view matrix."""

    def __init__(self, view=None):
        view = DEFAULT_VIEW if view is None else np.asarray(view, np.float64)
        if view.shape != (4, 4) or not np.all(np.isfinite(view)):
            raise ValueError("view must be a finite 4x4 matrix")
        rot = view[:3, :3]
        norms = np.linalg.norm(rot, axis=1, keepdims=True)
        if np.any(norms == 0):
            raise ValueError("view matrix has a zero row in its rotation part")
        rot = rot / norms
        self.view = view
        self.right, self.up, self.back = rot[0], rot[1], rot[2]  # view axes in world space
        # Eye = where the view maps to its origin; for a rigid view that is -R^T t.
        try:
            self.eye = -np.linalg.solve(view[:3, :3], view[:3, 3])
        except np.linalg.LinAlgError:
            raise ValueError("view matrix has a singular rotation part") from None
        # Billboard basis: node +X -> toward the viewer, +Y -> screen right, +Z -> screen up.
        self.billboard = np.stack([self.back, self.right, self.up], axis=1)
        self.billboard_quat = quat.from_matrix(self.billboard)


def dense_rows(ids: np.ndarray, object_ids) -> np.ndarray:
    """Rows of `object_ids` in the sorted id array `ids`; len(ids) for an id not in it."""
    q = np.asarray(object_ids, np.int64)
    n = len(ids)
    if n == 0:
        return np.zeros(q.shape, np.int64)
    pos = np.minimum(np.searchsorted(ids, q), n - 1)
    return np.where(ids[pos] == q, pos, n).astype(np.int64)


def _local_matrices(pivots, t, r, s):
    """local = T(c) T(t) R(r) S(s) T(-c) for every node: (N, 4, 4)."""
    a = quat.to_matrix(r) * s[:, None, :]
    m = np.zeros((len(pivots), 4, 4))
    m[:, :3, :3] = a
    m[:, :3, 3] = pivots + t - np.einsum("nij,nj->ni", a, pivots)
    m[:, 3, 3] = 1.0
    return m


class _FlagSet:
    """The flag masks of some flagged nodes (`Skeleton._flagged`), and which are uniform."""

    def __init__(self, f: np.ndarray):
        self.dit = (f & NODE_FLAG_DONT_INHERIT_TRANSLATION) != 0
        self.dir_ = (f & NODE_FLAG_DONT_INHERIT_ROTATION) != 0
        self.dis = (f & NODE_FLAG_DONT_INHERIT_SCALING) != 0
        self.bb = bb = (f & BILLBOARDED) != 0
        self.lx = lx = ((f & BILLBOARDED_LOCK_X) != 0) & ~bb
        self.ly = ly = ((f & BILLBOARDED_LOCK_Y) != 0) & ~bb & ~lx
        self.lz = lz = ((f & BILLBOARDED_LOCK_Z) != 0) & ~bb & ~lx & ~ly
        self.anchored = (f & CAMERA_ANCHORED) != 0
        self.lock = lx | ly | lz
        self.any_dir, self.any_dis = bool(self.dir_.any()), bool(self.dis.any())
        self.any_dir_dis = bool((self.dir_ | self.dis).any())
        self.any_dit, self.all_dit = bool(self.dit.any()), bool(self.dit.all())
        self.any_anchored, self.any_lock = bool(self.anchored.any()), bool(self.lock.any())
        self.any_bb, self.all_bb = bool(bb.any()), bool(bb.all())


class Skeleton:
    """A model's node hierarchy compiled for repeated evaluation."""

    def __init__(self, model: Model):
        self.notes: list[str] = []
        by_id: dict[int, Node] = {}
        for node in model.nodes():
            oid = int(node.object_id)
            if oid < 0:
                self.notes.append(f"node {node.name!r} has negative object id {oid}; ignored")
                continue
            if oid in by_id:
                self.notes.append(f"object id {oid} used by {by_id[oid].name!r} and {node.name!r}; "
                                  f"the second is ignored")
                continue
            by_id[oid] = node
        self.ids = np.array(sorted(by_id), np.int64)  # object id of each row
        self.index: dict[int, int] = {int(oid): i for i, oid in enumerate(self.ids.tolist())}
        self.count = n = len(self.ids)
        self.nodes: list[Node] = [by_id[int(oid)] for oid in self.ids.tolist()]
        self.pivots = np.zeros((n, 3))
        pivots = np.asarray(model.pivots, np.float64).reshape(-1, 3)
        has_pivot = self.ids < len(pivots)
        self.pivots[has_pivot] = pivots[self.ids[has_pivot]]
        for i in np.flatnonzero(~has_pivot).tolist():
            self.notes.append(f"node {self.nodes[i].name!r} (object id {int(self.ids[i])}) has no pivot; "
                              f"using the origin")
        self.flags = np.array([int(nd.flags) for nd in self.nodes], np.int64)
        self.parents = self._resolve_parents()
        self.depth = self._depths()
        self._cut_deep_chains()
        self.source_rows = np.arange(n)  # see `subset`
        self._compile_levels()

    def _compile_levels(self) -> None:
        """The per-level row groups that `world_matrices` walks, from flags, parents and depth."""
        n = self.count
        self.special = (self.flags & SPECIAL_FLAGS) != 0
        self.track_rotation = bool(self.special.any())
        # World rotation/scale are only needed on the chains above flagged nodes.
        self.needs_rotation = np.zeros(n, bool)
        for i in np.flatnonzero(self.special):
            p = int(self.parents[i])
            while p < n and not self.needs_rotation[p]:
                self.needs_rotation[p] = True
                p = int(self.parents[p])
        self.levels = []
        # Rows by depth, each level in row order: one sort, not a scan of every row per level (which
        # was quadratic in a deep chain: 100,000 chained nodes took 10 s).
        by_depth = np.argsort(self.depth, kind="stable")
        ends = np.cumsum(np.bincount(self.depth)) if n else np.zeros(0, np.int64)
        for d in range(len(ends)):
            idx = by_depth[(ends[d - 1] if d else 0):ends[d]]
            plain = idx[~self.special[idx]]
            flagged = idx[self.special[idx]]
            self.levels.append((plain, self.parents[plain], flagged, self.parents[flagged]))
        self.rotation_levels = [(p[self.needs_rotation[p]], pp[self.needs_rotation[p]]) for p, pp, _, _ in self.levels]
        self._camera: tuple | None = None  # the last view's CameraFrame
        self._flag_sets: dict[bytes, _FlagSet] = {}

    def subset(self, rows) -> Skeleton:
        """The skeleton of `rows` (skeleton rows) and all their ancestors, for posing only the nodes some
        reader needs (the effects read their emitters' rows, not the other 100,000 of a big model).

        Its rows are those nodes in this skeleton's row order (`source_rows[j]` is the row here of row j
        there), with the same parents, depths, levels and per-row operations, so the world matrix of
        every row it has is bit for bit the one `world_matrices` of this skeleton gives; notes are this
        skeleton's."""
        n = self.count
        want = np.asarray(rows, np.int64).reshape(-1)
        if np.any((want < 0) | (want >= n)):
            raise ValueError(f"skeleton subset: rows must be 0 .. {n - 1} (the skeleton has {n} nodes)")
        keep = np.zeros(n, bool)
        for i in want.tolist():
            while i < n and not keep[i]:  # parents are acyclic and end at the virtual root n
                keep[i] = True
                i = int(self.parents[i])
        src = np.flatnonzero(keep)
        m = len(src)
        remap = np.full(n + 1, m, np.int64)
        remap[src] = np.arange(m)
        sub = Skeleton.__new__(Skeleton)
        sub.notes = list(self.notes)
        sub.ids = self.ids[src]
        sub.index = {int(oid): j for j, oid in enumerate(sub.ids.tolist())}
        sub.count = m
        sub.nodes = [self.nodes[int(i)] for i in src.tolist()]
        sub.pivots = self.pivots[src]
        sub.flags = self.flags[src]
        sub.parents = remap[self.parents[src]]
        sub.depth = self.depth[src]
        sub.source_rows = src
        sub._compile_levels()
        return sub

    def rows(self, object_ids) -> np.ndarray:
        """The row of each object id (int64 array), N (= `count`, the identity row of palettes) for an
        id no node has."""
        return dense_rows(self.ids, object_ids)

    # -- hierarchy ------------------------------------------------------------------------------

    def _resolve_parents(self) -> np.ndarray:
        n = self.count
        root = n  # the virtual identity parent
        parents = np.full(n, root, np.int64)
        for i, node in enumerate(self.nodes):
            oid, p = int(self.ids[i]), int(node.parent_id)
            if p == -1 or p == 0xFFFFFFFF:
                continue
            p &= 0xFFFFFFFF  # the i32 parent field names the u32 object id with the same bits
            if p == oid:
                self.notes.append(f"node {node.name!r} (object id {oid}) is its own parent; treated as a root")
            elif p not in self.index:
                self.notes.append(f"node {node.name!r} (object id {oid}) has missing parent {p}; treated as a root")
            else:
                parents[i] = self.index[p]
        # Break cycles: walk each chain; a node met twice on one walk closes a cycle.
        state = np.zeros(n, np.int8)  # 0 unvisited, 1 on the current walk, 2 done
        for start in range(n):
            path = []
            i = start
            while i != root and state[i] == 0:
                state[i] = 1
                path.append(i)
                i = int(parents[i])
            if i != root and state[i] == 1:  # cycle: i .. end of path
                cycle = path[path.index(i):]
                cut = min(cycle)  # rows are in object id order: the smallest object id
                parents[cut] = root
                names = ", ".join(str(int(self.ids[c])) for c in sorted(cycle))
                self.notes.append(f"parent cycle among object ids {names}; object id {int(self.ids[cut])} "
                                  f"treated as a root")
            for j in path:
                state[j] = 2
        return parents

    def _cut_deep_chains(self) -> None:
        """Nodes deeper than MAX_DEPTH levels start a new chain (noted): every pose walks the levels one
        by one, so a 100,000-node parent chain cost seconds per pose (and 100 poses per effects frame)."""
        cut = np.flatnonzero((self.depth > 0) & (self.depth % (MAX_DEPTH + 1) == 0))
        if not len(cut):
            return
        self.parents[cut] = self.count
        self.depth = self.depth % (MAX_DEPTH + 1)
        self.notes.append(f"{len(cut)} node(s) more than {MAX_DEPTH} levels below a root, e.g. "
                          f"{self.nodes[int(cut[0])].name!r}, are treated as roots")

    def _depths(self) -> np.ndarray:
        n = self.count
        depth = np.full(n, -1, np.int64)
        for start in range(n):
            chain = []
            i = start
            while i != n and depth[i] < 0:
                chain.append(i)
                i = int(self.parents[i])
            d = -1 if i == n else int(depth[i])
            for j in reversed(chain):
                d += 1
                depth[j] = d
        return depth

    # -- evaluation -----------------------------------------------------------------------------

    def world_matrices(self, translation, rotation, scaling, view=None, camera: CameraFrame | None = None
                       ) -> np.ndarray:
        """(N, 4, 4) world matrices from per-node local translation (N, 3), rotation (N, 4) xyzw and
        scaling (N, 3), by row (see `ids`)."""
        n = self.count
        t = np.asarray(translation, np.float64).reshape(n, 3)
        r = quat.normalize(np.asarray(rotation, np.float64).reshape(n, 4))
        s = np.asarray(scaling, np.float64).reshape(n, 3)
        world = np.empty((n + 1, 4, 4))
        world[n] = np.eye(4)
        local = _local_matrices(self.pivots, t, r, s)
        if not self.track_rotation:
            for plain, par, _, _ in self.levels:
                world[plain] = world[par] @ local[plain]
            return world[:n]
        cam = camera if camera is not None else self.camera_frame(view)
        wrot = np.empty((n + 1, 4))
        wrot[n] = quat.IDENTITY
        wscale = np.ones((n + 1, 3))
        for (plain, par, flagged, fpar), (rp, rpar) in zip(self.levels, self.rotation_levels, strict=True):
            if len(plain):
                world[plain] = world[par] @ local[plain]
            if len(rp):
                wrot[rp] = quat.multiply(wrot[rpar], r[rp])
                wscale[rp] = wscale[rpar] * s[rp]
            if len(flagged):
                self._flagged(flagged, fpar, t, r, s, world, wrot, wscale, cam)
        return world[:n]

    def camera_frame(self, view=None) -> CameraFrame:
        """CameraFrame(view), kept for the last view seen: consecutive frames with the same view
        matrix (by value) share it (it is a pure function of the view)."""
        if view is not None:
            view = np.asarray(view, np.float64)
        key = None if view is None else (view.shape, view.tobytes())
        cached = self._camera
        if cached is not None and cached[0] == key:
            return cached[1]
        cam = CameraFrame(view)
        self._camera = (key, cam)
        return cam

    def _flag_set(self, idx) -> _FlagSet:
        """The (static) flag masks of the flagged rows `idx`, built once per set of rows."""
        key = idx.tobytes()
        fs = self._flag_sets.get(key)
        if fs is None:
            fs = self._flag_sets[key] = _FlagSet(self.flags[idx])
        return fs

    def _flagged(self, idx, par, t, r, s, world, wrot, wscale, cam: CameraFrame):
        """World matrices of the flagged rows `idx` (see the module docstring). Where a mask is the
        same for every row, the branch np.where would discard is not computed; the values kept are
        computed exactly as with both branches."""
        fs = self._flag_set(idx)
        dit, dir_, dis, bb = fs.dit, fs.dir_, fs.dis, fs.bb
        lx, ly, anchored = fs.lx, fs.ly, fs.anchored

        wp = world[par]
        rp = np.where(dir_[:, None], quat.IDENTITY, wrot[par]) if fs.any_dir else wrot[par]
        sp = np.where(dis[:, None], 1.0, wscale[par]) if fs.any_dis else wscale[par]
        if fs.any_dir_dis:
            lp = np.where((dir_ | dis)[:, None, None], quat.to_matrix(rp) * sp[:, None, :], wp[:, :3, :3])
        else:
            lp = wp[:, :3, :3].copy()
        c = self.pivots[idx]
        if fs.all_dit:
            anchor = c
        else:
            carried = np.einsum("nij,nj->ni", wp[:, :3, :3], c) + wp[:, :3, 3]
            anchor = np.where(dit[:, None], c, carried) if fs.any_dit else carried
        if fs.any_anchored:
            anchor = np.where(anchored[:, None], cam.eye, anchor)
        a = anchor + np.einsum("nij,nj->ni", lp, t[idx])

        rl = r[idx]
        sl = s[idx]
        lock = fs.lock
        if fs.any_lock:
            d = quat.rotate(quat.conjugate(quat.multiply(rp, rl)), np.broadcast_to(cam.back, (len(idx), 3)))
            angle = np.where(lx, np.arctan2(d[:, 2], d[:, 1]),
                             np.where(ly, np.arctan2(-d[:, 2], d[:, 0]), np.arctan2(d[:, 1], d[:, 0])))
            axis = np.where(lx[:, None], [1.0, 0.0, 0.0], np.where(ly[:, None], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]))
            turned = quat.multiply(rl, quat.axis_angle(axis, angle))
            rl = np.where(lock[:, None], turned, rl)
            sl[lx, 2] *= -1.0
        if fs.any_bb:
            rot_bb = quat.multiply(np.broadcast_to(cam.billboard_quat, rl.shape), rl)
            rot = rot_bb if fs.all_bb else np.where(bb[:, None], rot_bb, quat.multiply(rp, rl))
        else:
            rot = quat.multiply(rp, rl)
        sc = sp * sl
        lin_plain = None if fs.all_bb else lp @ (quat.to_matrix(rl) * sl[:, None, :])
        lin_bb = quat.to_matrix(rot) * sc[:, None, :] if fs.any_bb else None
        if lin_plain is None:
            lin = lin_bb
        else:
            lin = lin_plain if lin_bb is None else np.where(bb[:, None, None], lin_bb, lin_plain)
        m = np.zeros((len(idx), 4, 4))
        m[:, :3, :3] = lin
        m[:, :3, 3] = a - np.einsum("nij,nj->ni", lin, c)
        m[:, 3, 3] = 1.0
        world[idx] = m
        wrot[idx] = rot
        wscale[idx] = sc
