"""The per-frame animation code as it was before the speed-ups of issue #18, kept verbatim as the
reference the exactness tests compare against bit for bit: `reference_palettes` (one
np.add.reduceat over every matrix group), `ReferenceSkeleton` (every flag mask and both branches
of every np.where computed, a new CameraFrame per call) and `reference_uv_matrices`."""

from __future__ import annotations

import numpy as np

from renderer.anim import quat
from renderer.anim.skeleton import (
    BILLBOARDED,
    BILLBOARDED_LOCK_X,
    BILLBOARDED_LOCK_Y,
    BILLBOARDED_LOCK_Z,
    CAMERA_ANCHORED,
    CameraFrame,
    Skeleton,
)
from renderer.anim.skinning import GeosetSkin
from renderer.rules import (
    NODE_FLAG_DONT_INHERIT_ROTATION,
    NODE_FLAG_DONT_INHERIT_SCALING,
    NODE_FLAG_DONT_INHERIT_TRANSLATION,
)


def reference_palettes(skins: list[GeosetSkin], node_count: int, node_matrices) -> list[np.ndarray]:
    """Every geoset's palette, as the old PaletteBuilder made it."""
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
    members = np.concatenate(members) if members else np.zeros(0, np.int64)
    sizes = np.concatenate(sizes).astype(np.float64) if sizes else np.zeros(0)
    dest = np.concatenate(dest) if dest else np.zeros(0, np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if len(sizes) else np.zeros(0, np.int64)
    n = node_count
    nodes = np.empty((n + 1, 4, 4))
    nodes[:n] = node_matrices
    nodes[n] = np.eye(4)
    buf = np.broadcast_to(np.eye(4), (rows, 4, 4)).copy()
    if len(dest):
        sums = np.add.reduceat(nodes[members], starts, axis=0)
        buf[dest] = sums / sizes[:, None, None]
    return [nodes if off is None else buf[off:off + s.palette_size] for s, off in zip(skins, offsets, strict=True)]


def reference_uv_matrices(translation, rotation, scaling) -> np.ndarray:
    t = np.asarray(translation, np.float64).reshape(-1, 3)
    r = quat.to_matrix(np.asarray(rotation, np.float64).reshape(-1, 4))[:, :2, :2]
    s = np.asarray(scaling, np.float64).reshape(-1, 3)
    lin = s[:, :2, None] * r
    h = np.array([0.5, 0.5])
    m = np.zeros((len(t), 3, 3))
    m[:, :2, :2] = lin
    m[:, :2, 2] = np.einsum("nij,nj->ni", lin, t[:, :2] - h) + h
    m[:, 2, 2] = 1.0
    return m


class ReferenceSkeleton(Skeleton):
    """A Skeleton evaluating flagged nodes with the old code."""

    def camera_frame(self, view=None) -> CameraFrame:
        return CameraFrame(view)

    def _flagged(self, idx, par, t, r, s, world, wrot, wscale, cam: CameraFrame):
        f = self.flags[idx]
        dit = (f & NODE_FLAG_DONT_INHERIT_TRANSLATION) != 0
        dir_ = (f & NODE_FLAG_DONT_INHERIT_ROTATION) != 0
        dis = (f & NODE_FLAG_DONT_INHERIT_SCALING) != 0
        bb = (f & BILLBOARDED) != 0
        lx = ((f & BILLBOARDED_LOCK_X) != 0) & ~bb
        ly = ((f & BILLBOARDED_LOCK_Y) != 0) & ~bb & ~lx
        lz = ((f & BILLBOARDED_LOCK_Z) != 0) & ~bb & ~lx & ~ly
        anchored = (f & CAMERA_ANCHORED) != 0

        wp = world[par]
        rp = np.where(dir_[:, None], quat.IDENTITY, wrot[par])
        sp = np.where(dis[:, None], 1.0, wscale[par])
        lp = np.where((dir_ | dis)[:, None, None], quat.to_matrix(rp) * sp[:, None, :], wp[:, :3, :3])
        c = self.pivots[idx]
        carried = np.einsum("nij,nj->ni", wp[:, :3, :3], c) + wp[:, :3, 3]
        anchor = np.where(dit[:, None], c, carried)
        anchor = np.where(anchored[:, None], cam.eye, anchor)
        a = anchor + np.einsum("nij,nj->ni", lp, t[idx])

        rl = r[idx].copy()
        sl = s[idx].copy()
        lock = lx | ly | lz
        if lock.any():
            d = quat.rotate(quat.conjugate(quat.multiply(rp, rl)), np.broadcast_to(cam.back, (len(idx), 3)))
            angle = np.where(lx, np.arctan2(d[:, 2], d[:, 1]),
                             np.where(ly, np.arctan2(-d[:, 2], d[:, 0]), np.arctan2(d[:, 1], d[:, 0])))
            axis = np.where(lx[:, None], [1.0, 0.0, 0.0], np.where(ly[:, None], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]))
            turned = quat.multiply(rl, quat.axis_angle(axis, angle))
            rl = np.where(lock[:, None], turned, rl)
            sl[lx, 2] *= -1.0
        rot = quat.multiply(rp, rl)
        rot = np.where(bb[:, None], quat.multiply(np.broadcast_to(cam.billboard_quat, rl.shape), rl), rot)
        sc = sp * sl
        lin_plain = lp @ (quat.to_matrix(rl) * sl[:, None, :])
        lin_bb = quat.to_matrix(rot) * sc[:, None, :]
        lin = np.where(bb[:, None, None], lin_bb, lin_plain)
        m = np.zeros((len(idx), 4, 4))
        m[:, :3, :3] = lin
        m[:, :3, 3] = a - np.einsum("nij,nj->ni", lin, c)
        m[:, 3, 3] = 1.0
        world[idx] = m
        wrot[idx] = rot
        wscale[idx] = sc


def same_bits(a, b) -> bool:
    """a and b have the same dtype, shape and bytes (stricter than np.array_equal: -0.0 is not 0.0,
    a NaN equals the same NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.ascontiguousarray(a).tobytes() == \
        np.ascontiguousarray(b).tobytes()
