"""Cameras: the documented auto framing, CAMS cameras by name, explicit eye/target/up/fov.

Conventions (DESIGN.md): Z is up, models face +X. Auto camera: centre c = (min + max) / 2 of the
chosen bounds, radius r = max(boundsRadius, |max - min| / 2); bounds come from the MODL extent,
else the sequence's extent, else the box of all geoset vertices in bind pose, else c = origin and
r = 100. Vertical fov 45 degrees, direction from azimuth 30 and elevation 20 degrees,
d = 1.1 r / sin(fov / 2), eye = c + d dir, up = +Z, near = d / 100, far = 10 d. Right-handed
look-at and an OpenGL perspective projection.

The ``fit`` camera (FIT_RULE) keeps that view's direction and fov but frames what the frame draws
instead of the extent the file declares: a MODL extent smaller than the posed model clips it (a
raised head), and one far larger than a particle effect leaves the effect tiny. It fits the drawn
points themselves to the frustum (the nearest eye that holds them all, with a margin), not a sphere
around them, so a model fills the frame along its longer projected side. It is a camera rule of its own, named
in the trace key (``|fit|``), so keys and goldens made with ``auto`` keep their meaning.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import cached_property

import numpy as np

from renderer.model import Extent, Model

AUTO_CAMERA = "auto"  # the DESIGN.md rule: bounds from the MODL extent (then sequence, vertices, default)
FIT_CAMERA = "fit"  # the same view around what the frame draws: posed visible geometry, particles, ribbons
FIT_RULE = ("fit-v2: the points the frame draws (posed vertices of geosets with alpha > 0, the corners of live"
            " PRE2/PREM particle quads, PREM child positions, ribbon edge points), projected along auto's"
            " direction with its fov: the nearest eye whose frustum, narrowed to FIT_MARGIN of each half-side,"
            " holds them all (centred on the binding axis); nothing drawn: the auto camera")
FIT_MARGIN = 0.9  # drawn points reach at most 90% of the way from the frame's centre to its edges
FIT_NEAREST = 0.1  # the nearest drawn point is at least this fraction of the drawn box's half-diagonal away
AUTO_FOV_DEG = 45.0
AUTO_AZIMUTH_DEG = 30.0
AUTO_ELEVATION_DEG = 20.0


class CameraError(ValueError):
    """A camera spec that names no camera or cannot be parsed."""


@dataclass(frozen=True)
class Camera:
    eye: tuple
    target: tuple
    up: tuple = (0.0, 0.0, 1.0)
    fov_deg: float = AUTO_FOV_DEG
    near: float = 1.0
    far: float = 10000.0
    source: str = "explicit"  # auto:<bounds source>, cams:<name>, explicit

    def view(self) -> np.ndarray:
        return self._view.copy()  # a copy: the caller may change it, the camera stays what it was

    @cached_property
    def _view(self) -> np.ndarray:  # a frame asks three times (pose, effects, draw): computed once
        return look_at(self.eye, self.target, self.up)

    def projection(self, aspect: float) -> np.ndarray:
        return perspective(self.fov_deg, aspect, self.near, self.far)

    def as_dict(self) -> dict:
        return {k: list(v) if isinstance(v, list) else v for k, v in self._dict.items()}

    @cached_property
    def _dict(self) -> dict:
        d = asdict(self)
        for k in ("eye", "target", "up"):
            d[k] = [round(float(x), 6) for x in d[k]]
        for k in ("fov_deg", "near", "far"):
            d[k] = round(float(d[k]), 6)
        return d


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """Right-handed OpenGL look-at view matrix (world -> view)."""
    e, t, u = (np.asarray(v, np.float64) for v in (eye, target, up))
    f = t - e
    n = np.linalg.norm(f)
    f = f / n if n > 0 else np.array([1.0, 0.0, 0.0])
    s = np.cross(f, u)
    if np.linalg.norm(s) < 1e-9:  # looking along up: pick another up
        s = np.cross(f, np.array([0.0, 1.0, 0.0]) if abs(f[1]) < 0.9 else np.array([1.0, 0.0, 0.0]))
    s /= np.linalg.norm(s)
    uu = np.cross(s, f)
    m = np.eye(4)
    m[0, :3], m[1, :3], m[2, :3] = s, uu, -f
    m[:3, 3] = -m[:3, :3] @ e
    return m


def perspective(fov_deg: float, aspect: float, near: float, far: float) -> np.ndarray:
    f = 1.0 / math.tan(math.radians(fov_deg) / 2)
    m = np.zeros((4, 4))
    m[0, 0] = f / aspect
    m[1, 1] = f
    m[2, 2] = (far + near) / (near - far)
    m[2, 3] = 2 * far * near / (near - far)
    m[3, 2] = -1.0
    return m


def _usable(e: Extent | None) -> tuple[np.ndarray, float] | None:
    if e is None:
        return None
    lo, hi = np.asarray(e.min, np.float64), np.asarray(e.max, np.float64)
    c = (lo + hi) / 2
    r = max(float(e.radius), float(np.linalg.norm(hi - lo) / 2))
    if not (np.all(np.isfinite(c)) and math.isfinite(r)) or r <= 0:
        return None
    return c, r


def model_bounds(model: Model, sequence: int | None = None) -> tuple[np.ndarray, float, str]:
    """(centre, radius, source) following the documented order of bounds sources."""
    got = _usable(model.extent)
    if got:
        return got[0], got[1], "model-extent"
    if sequence is not None and 0 <= sequence < len(model.sequences):
        got = _usable(model.sequences[sequence].extent)
        if got:
            return got[0], got[1], "sequence-extent"
    verts = [g.vertices for g in model.geosets if len(g.vertices)]
    if verts:
        v = np.concatenate(verts).astype(np.float64)
        v = v[np.all(np.isfinite(v), axis=1)]
        if len(v):
            lo, hi = v.min(0), v.max(0)
            r = float(np.linalg.norm(hi - lo) / 2)
            if r > 0:
                return (lo + hi) / 2, r, "geoset-vertices"
    return np.zeros(3), 100.0, "default"


def auto_camera(model: Model, sequence: int | None = None, aspect: float = 1.0) -> Camera:
    c, r, source = model_bounds(model, sequence)
    return sphere_camera(c, r, aspect, f"auto:{source}")


def fit_camera(points, aspect: float, fallback: Camera) -> Camera:
    """The ``fit`` rule (FIT_RULE): the auto camera's direction and field of view, moved to the nearest eye
    whose frustum holds every point the frame draws (`renderer.framing.drawn_points`, (n, 3)) within
    FIT_MARGIN of each half-side: the drawn extent, not a sphere around it, fills the frame along its
    binding axis and is centred on both. `fallback` (the auto camera) when there is no point, or none
    finite, or they span nothing: nothing is drawn, so there is nothing better to frame."""
    if points is None:
        return fallback
    p = np.asarray(points, np.float64).reshape(-1, 3)
    p = p[np.all(np.isfinite(p), axis=1)]
    if not len(p):
        return fallback
    lo, hi = p.min(0), p.max(0)
    r = float(np.linalg.norm(hi - lo) / 2)
    if not math.isfinite(r) or r <= 0:
        return fallback
    rot = look_at(auto_direction(), (0.0, 0.0, 0.0))[:3, :3]  # rows: right, up, back (the view's axes)
    right, up, forward = rot[0], rot[1], -rot[2]
    x, y, z = (_dot(p, v) for v in (right, up, forward))
    ty = math.tan(math.radians(AUTO_FOV_DEG) / 2) * FIT_MARGIN
    tx = ty * aspect
    # |x - ex| <= tx (z - ez) for every point (and likewise y): the eye (ex, ey, ez) in view axes.
    ax, bx = float(np.max(x - tx * z)), float(np.min(x + tx * z))
    ay, by = float(np.max(y - ty * z)), float(np.min(y + ty * z))
    ez = min((bx - ax) / (2 * tx), (by - ay) / (2 * ty), float(z.min()) - FIT_NEAREST * r)
    ex, ey = (ax + bx) / 2, (ay + by) / 2
    eye = ex * right + ey * up + ez * forward
    depth = z - ez
    centre = float(_dot(((lo + hi) / 2)[None], forward)[0]) - ez
    target = eye + max(centre, float(depth.min())) * forward
    return Camera(tuple(eye.tolist()), tuple(target.tolist()), (0.0, 0.0, 1.0), AUTO_FOV_DEG,
                  float(depth.min()) / 2, 10 * float(depth.max()), "fit:drawn")


def _dot(p: np.ndarray, v: np.ndarray) -> np.ndarray:
    """p . v row by row, written out: the same sum in every process (no BLAS kernel choosing its order)."""
    return p[:, 0] * v[0] + p[:, 1] * v[1] + p[:, 2] * v[2]


def auto_direction() -> np.ndarray:
    """The unit vector from the target to the eye: azimuth 30, elevation 20 degrees."""
    az, el = math.radians(AUTO_AZIMUTH_DEG), math.radians(AUTO_ELEVATION_DEG)
    return np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])


def sphere_camera(c: np.ndarray, r: float, aspect: float, source: str) -> Camera:
    """The auto direction (azimuth 30, elevation 20 degrees), fov 45 and distance 1.1 r / sin(fov / 2) around
    the sphere (c, r); for a portrait aspect the distance keeps the sphere in view horizontally too."""
    fov = math.radians(AUTO_FOV_DEG)
    if aspect < 1.0:  # keep the whole sphere in view horizontally too
        fov_x_half = math.atan(math.tan(fov / 2) * aspect)
        d = 1.1 * r / math.sin(fov_x_half)
    else:
        d = 1.1 * r / math.sin(fov / 2)
    eye = c + d * auto_direction()
    return Camera(tuple(eye.tolist()), tuple(c.tolist()), (0.0, 0.0, 1.0), AUTO_FOV_DEG, d / 100, 10 * d, source)


def cams_camera(model: Model, name: str) -> Camera:
    for cam in model.cameras:
        if str(cam.name).lower() == name.lower():
            fov = math.degrees(cam.field_of_view) if cam.field_of_view < 3.2 else cam.field_of_view
            near = cam.near_clip if cam.near_clip > 0 else 1.0
            far = cam.far_clip if cam.far_clip > near else near * 1000
            return Camera(tuple(map(float, cam.position)), tuple(map(float, cam.target)), (0.0, 0.0, 1.0),
                          fov, near, far, f"cams:{cam.name}")
    names = ", ".join(repr(str(c.name)) for c in model.cameras) or "none"
    raise CameraError(f"the model has no camera named {name!r} (cameras: {names})")


def parse_explicit(spec: str) -> Camera:
    """'ex,ey,ez:tx,ty,tz:ux,uy,uz:fov' (fov in degrees; up and fov optional)."""
    parts = spec.split(":")
    try:
        vecs = [tuple(float(x) for x in p.split(",")) for p in parts[:3]]
        if len(vecs) < 2 or any(len(v) != 3 for v in vecs):
            raise ValueError
        fov = float(parts[3]) if len(parts) > 3 else AUTO_FOV_DEG
    except ValueError:
        raise CameraError(
            f"cannot parse camera {spec!r}: expected eye:target[:up[:fov]] as x,y,z:x,y,z:x,y,z:deg"
        ) from None
    eye, target = vecs[0], vecs[1]
    up = vecs[2] if len(vecs) > 2 else (0.0, 0.0, 1.0)
    if not 1.0 <= fov <= 170.0:
        raise CameraError(f"camera field of view {fov} is outside 1..170 degrees")
    d = float(np.linalg.norm(np.subtract(target, eye))) or 1.0
    return Camera(eye, target, up, fov, d / 100, d * 100, "explicit")


def resolve_camera(spec: str, model: Model, sequence: int | None = None, aspect: float = 1.0) -> Camera:
    """'auto', a CAMS camera name, or an explicit eye:target:up:fov. ('fit' needs the frame's pose and
    effects: `renderer.frame.Renderer` resolves it with `fit_camera`; here it is the auto camera.)"""
    if spec in ("", AUTO_CAMERA, FIT_CAMERA):
        return auto_camera(model, sequence, aspect)
    if spec.count(":") >= 1 and any(ch.isdigit() for ch in spec.split(":")[0]):
        return parse_explicit(spec)
    return cams_camera(model, spec)
