"""Helpers for render tests: one shared renderer per test process, tiny synthetic models."""

from __future__ import annotations

import os

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from renderer.formats import load_model  # noqa: E402
from renderer.formats.mdx import save_mdx  # noqa: E402
from renderer.model import Bone, Layer, Material, Model, Sequence, Texture  # noqa: E402
from renderer.samples.build import extent_of, geoset  # noqa: E402

_RENDERER = None
FRONT_CAMERA = "100,0,0:0,0,0:0,0,1:40"  # looking down -X at the origin, Z up


def renderer():
    global _RENDERER
    if _RENDERER is None:
        from renderer.frame import Renderer

        _RENDERER = Renderer()
    return _RENDERER


def quad(x=0.0, half=20.0, uv_sets=None, material=0, y=0.0, z=0.0):
    """A quad in the plane x = const facing +X (counter-clockwise seen from +X)."""
    verts = np.array([[x, y - half, z - half], [x, y + half, z - half], [x, y + half, z + half],
                      [x, y - half, z + half]], "<f4")
    norms = np.tile(np.array([1, 0, 0], "<f4"), (4, 1))
    if uv_sets is None:
        uv_sets = [np.array([[0, 1], [1, 1], [1, 0], [0, 0]], "<f4")]
    return geoset(verts, norms, uv_sets, np.array([0, 1, 2, 0, 2, 3], "<u2"), material)


def write_model(tmp: Path, name: str, materials, textures: dict[str, np.ndarray], geosets) -> Path:
    """Write textures (TGA) and the model (MDX, our writer) into tmp; returns the model path."""
    m = Model(version=800, name=name)
    m.sequences = [Sequence(name="Stand", interval=(0, 1000))]
    for rel, rgba in textures.items():
        m.textures.append(Texture(path=rel))
        Image.fromarray(np.ascontiguousarray(rgba, np.uint8), "RGBA").save(tmp / rel)
    m.materials = materials
    m.geosets = geosets
    m.bones = [Bone(name="Root", object_id=0, flags=0x100)]
    m.pivots = np.zeros((1, 3), "<f4")
    m.extent = extent_of(np.vstack([g.vertices for g in geosets]))
    path = tmp / f"{name}.mdx"
    save_mdx(m, path)
    return path


def solid(rgba, size=4) -> np.ndarray:
    img = np.empty((size, size, 4), np.uint8)
    img[...] = rgba
    return img


def render(path: Path, size=64, camera=FRONT_CAMERA, background="#4080c0", **kw):
    from renderer.frame import FrameSpec

    model = load_model(path)
    return renderer().render(model, FrameSpec(width=size, height=size, camera=camera, background=background, **kw))


def layer(mode, texture=0, flags=0x1, coord=0, alpha=1.0) -> Material:
    return Material(layers=[Layer(filter_mode=mode, texture_id=texture, shading_flags=flags, coord_id=coord,
                                  alpha=alpha)])


def touches_border(mask) -> bool:
    """Whether any pixel of the mask's outermost rows or columns is set (the drawing spills out)."""
    return bool(mask[0].any() or mask[-1].any() or mask[:, 0].any() or mask[:, -1].any())


def box_fraction(mask) -> float:
    """Width or height of the set pixels' box, the larger, over the (square) frame's side."""
    ys, xs = np.nonzero(mask)
    return max(xs.max() - xs.min() + 1, ys.max() - ys.min() + 1) / mask.shape[0]
