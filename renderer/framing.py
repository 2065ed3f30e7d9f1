"""What a frame draws, as points: the input of the ``fit`` camera rule (renderer.camera.FIT_RULE).

`drawn_points(model, pose, sim, view)` are, in model space, the posed vertices of every geoset whose
alpha is above zero (the palette skinning the GPU runs, on the CPU), the four corners of every live
PRE2 particle and PREM particle drawn as a quad (the quads the particle shader draws from the same
instances and `view`: camera-facing billboards, XY quads, tails from the head along the velocity),
the positions of PREM child model instances, and the edge points of live ribbons. A soft particle
is a quad of its scale in world units, so its corners, not its centre, are what the frame must hold.
Non-finite points are left out (a hostile model must not make the camera NaN). None when nothing
is drawn.
"""

from __future__ import annotations

import numpy as np

from renderer.anim.skinning import skin_with_palette
from renderer.fx import pre2
from renderer.fx.draw import prem_quads  # the quads draw_effects draws, so the points match them

__all__ = ["drawn_points", "quad_corners"]

_CORNERS = np.array([[-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0], [1.0, 1.0]])  # the shader's corner strip


def _finite(points) -> np.ndarray:
    p = np.asarray(points, np.float64).reshape(-1, 3)
    return p[np.all(np.isfinite(p), axis=1)]


def quad_corners(inst: np.ndarray, view: np.ndarray) -> np.ndarray:
    """(4 n, 3) corners of the particle quads `inst` (pre2.INSTANCE_FLOATS rows) as the particle shader
    (renderer/gl/particles.py) places them seen through `view`: kind 0 a billboard, centre +- size
    along the view's right and up; kind 1 an XY quad turned by its axis; kinds 2 and 3 a tail from
    the centre along its axis, +- size across it."""
    inst = np.asarray(inst, np.float64).reshape(-1, pre2.INSTANCE_FLOATS)
    rot = np.asarray(view, np.float64)[:3, :3]
    rot = rot / np.linalg.norm(rot, axis=1, keepdims=True)
    right, up, back = rot
    pos, axis, size = inst[:, 0:3], inst[:, 3:6], inst[:, 14:15]
    kind = np.rint(inst[:, 15]).astype(int)
    cx, cy = _CORNERS[:, 0][None, :, None], _CORNERS[:, 1][None, :, None]  # (1, 4, 1)
    ax = np.stack([axis[:, 0], axis[:, 1], np.zeros(len(axis))], axis=1)
    ay = np.stack([-axis[:, 1], axis[:, 0], np.zeros(len(axis))], axis=1)
    u_dir = np.where((kind == 0)[:, None], right, ax)[:, None, :]
    v_dir = np.where((kind == 0)[:, None], up, ay)[:, None, :]
    quads = pos[:, None, :] + (cx * u_dir + cy * v_dir) * size[:, None, :]
    tails = kind >= 2
    if tails.any():
        n = np.where((kind[tails] == 3)[:, None], np.array([0.0, 0.0, 1.0]), back)
        side = np.cross(axis[tails], n)
        length = np.linalg.norm(side, axis=1, keepdims=True)
        side = np.where(length > 1e-9, side / np.where(length > 1e-9, length, 1.0), up)
        st = (cx + 1) / 2
        quads[tails] = (pos[tails][:, None, :] + st * axis[tails][:, None, :]
                        + cy * side[:, None, :] * size[tails][:, None, :])
    return quads.reshape(-1, 3)


def geometry_points(model, pose) -> list[np.ndarray]:
    """The posed vertices of the geosets drawn at this pose (alpha > 0)."""
    out = []
    for gi, g in enumerate(model.geosets):
        if gi >= len(pose.palettes) or not len(g.vertices) or not pose.geoset_alpha[gi] > 0:
            continue
        positions, _ = skin_with_palette(pose.palettes[gi], pose.skins[gi], g.vertices, ())
        out.append(_finite(positions))
    return out


def effects_points(sim, view) -> list[np.ndarray]:
    """Live particles' quad corners, PREM child instances and ribbon edges of `sim`."""
    if sim is None:
        return []
    out = []
    for e in sim.pre2:
        if len(e.particles):
            inst, _ = e.instances(sim.t_ms, sim.world[e.spec.node], view)
            out.append(_finite(quad_corners(inst, view)))
    for e in sim.prem:
        if len(e.particles) == 0:
            continue
        if e.spec.model:
            out.append(_finite(e.instance_matrices()[:, :3, 3]))
        else:
            out.append(_finite(quad_corners(prem_quads(e, sim), view)))
    for r in sim.ribbons:
        strip = r.trail.strip()
        if len(strip) >= 2:
            out.append(_finite(np.concatenate([strip.above, strip.below])))
    return out


def drawn_points(model, pose, sim, view) -> np.ndarray | None:
    """(n, 3) points of everything the frame draws (module docstring), or None when it draws nothing."""
    parts = [p for p in (*geometry_points(model, pose), *effects_points(sim, view)) if len(p)]
    return np.concatenate(parts) if parts else None

