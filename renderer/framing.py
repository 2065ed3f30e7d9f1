"""What a frame draws, as a box: the input of the ``fit`` camera rule (renderer.camera.FIT_RULE).

`drawn_box(pose, sim, view)` bounds, in model space, the posed vertices of every geoset whose alpha
is above zero (the palette skinning the GPU runs, on the CPU), the live PRE2 particles and the
PREM particles drawn as quads (centre +- the drawn half-size), the positions of PREM child model
instances, and the edge points of live ribbons. Non-finite points are left out (a hostile model
must not make the camera NaN). None when nothing is drawn.
"""

from __future__ import annotations

import numpy as np

from renderer.anim.skinning import skin_with_palette
from renderer.fx.draw import prem_quads  # the quads draw_effects draws, so the box matches them

__all__ = ["drawn_box"]

Box = tuple[np.ndarray, np.ndarray]


def _box(points: np.ndarray, radii: np.ndarray | float = 0.0) -> Box | None:
    points = np.asarray(points, np.float64).reshape(-1, 3)
    radii = np.broadcast_to(np.abs(np.asarray(radii, np.float64)), (len(points),))
    ok = np.all(np.isfinite(points), axis=1) & np.isfinite(radii)
    if not ok.any():
        return None
    p, r = points[ok], radii[ok][:, None]
    return (p - r).min(0), (p + r).max(0)


def _union(boxes) -> Box | None:
    boxes = [b for b in boxes if b is not None]
    if not boxes:
        return None
    return np.min([b[0] for b in boxes], axis=0), np.max([b[1] for b in boxes], axis=0)


def geometry_box(model, pose) -> Box | None:
    """The posed vertices of the geosets drawn at this pose (alpha > 0)."""
    boxes = []
    for gi, g in enumerate(model.geosets):
        if gi >= len(pose.palettes) or not len(g.vertices) or not pose.geoset_alpha[gi] > 0:
            continue
        positions, _ = skin_with_palette(pose.palettes[gi], pose.skins[gi], g.vertices, ())
        boxes.append(_box(positions))
    return _union(boxes)


def effects_box(sim, view) -> Box | None:
    """Live particles (centre +- drawn half-size), PREM child instances and ribbon edges of `sim`."""
    if sim is None:
        return None
    boxes = []
    for e in sim.pre2:
        if len(e.particles):
            inst, _ = e.instances(sim.t_ms, sim.world[e.spec.node], view)
            boxes.append(_box(inst[:, 0:3], inst[:, 14]))
    for e in sim.prem:
        if len(e.particles) == 0:
            continue
        if e.spec.model:
            boxes.append(_box(e.instance_matrices()[:, :3, 3]))
        else:
            quads = prem_quads(e, sim)
            boxes.append(_box(quads[:, 0:3], quads[:, 14]))
    for r in sim.ribbons:
        strip = r.trail.strip()
        if len(strip) >= 2:
            boxes.append(_box(np.concatenate([strip.above, strip.below])))
    return _union(boxes)


def drawn_box(model, pose, sim, view) -> Box | None:
    """The box of everything the frame draws (module docstring), or None when it draws nothing."""
    return _union([geometry_box(model, pose), effects_box(sim, view)])
