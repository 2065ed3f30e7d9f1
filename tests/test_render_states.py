"""Layer flags, texture wrap, draw order and billboards, checked on pixels."""

from __future__ import annotations

import numpy as np
from render_util import layer, quad, render, solid, write_model

from renderer.formats import load_model
from renderer.formats.mdx import save_mdx
from renderer.model import Helper, Layer, Material

BACK_CAMERA = "-100,0,0:0,0,0:0,0,1:40"  # behind the quads, which face +X


def test_back_faces_are_culled_unless_two_sided(tmp_path):
    red = solid((255, 0, 0, 255))
    one = write_model(tmp_path, "onesided", [layer(0, flags=0x1)], {"red.tga": red}, [quad()])
    two = write_model(tmp_path, "twosided", [layer(0, flags=0x11)], {"red.tga": red}, [quad()])
    assert tuple(render(one, camera=BACK_CAMERA).rgba[32, 32, :3]) == (0x40, 0x80, 0xC0)
    assert tuple(render(two, camera=BACK_CAMERA).rgba[32, 32, :3]) == (255, 0, 0)
    # Material flag 0x2 (TwoSided) works too.
    mat = layer(0, flags=0x1)
    mat.flags = 0x2
    both = write_model(tmp_path, "mattwosided", [mat], {"red.tga": red}, [quad()])
    assert tuple(render(both, camera=BACK_CAMERA).rgba[32, 32, :3]) == (255, 0, 0)


def _stripes() -> np.ndarray:
    img = np.zeros((8, 8, 4), np.uint8)
    img[..., 3] = 255
    img[:, :4, 0] = 255  # left half red
    img[:, 4:, 2] = 255  # right half blue
    return img


def test_texture_wrap_flags_choose_repeat_or_clamp(tmp_path):
    uv = np.array([[0, 1], [2, 1], [2, 0], [0, 0]], "<f4")  # u runs 0..2 across the quad
    results = {}
    for flags in (0, 1):
        path = write_model(tmp_path, f"wrap{flags}", [layer(0)], {"s.tga": _stripes()}, [quad(uv_sets=[uv])])
        m = load_model(path)
        m.textures[0].flags = flags
        save_mdx(m, path)
        results[flags] = render(path, size=128).rgba
    # At world y = +5, u = 1.25: repeat -> the red left half again; clamp -> the blue edge texel.
    x = 64 + int(round(64 * 5 / (100 * np.tan(np.radians(20)))))  # +Y is screen right
    y = 64
    assert tuple(results[1][y, x, :3]) == (255, 0, 0)
    assert tuple(results[0][y, x, :3]) == (0, 0, 255)


def test_no_depth_test_draws_over_nearer_geometry(tmp_path):
    green, red = solid((0, 255, 0, 255)), solid((255, 0, 0, 255))
    near = quad(x=10.0, material=0)  # nearer to the camera at +X
    far = quad(x=-10.0, half=10.0, material=1)
    mats = [layer(0, texture=0), Material(layers=[Layer(filter_mode=0, texture_id=1, shading_flags=0x1 | 0x40)])]
    path = write_model(tmp_path, "nodepth", mats, {"g.tga": green, "r.tga": red}, [near, far])
    assert tuple(render(path).rgba[32, 32, :3]) == (255, 0, 0)  # drawn later, ignoring depth
    mats[1].layers[0].shading_flags = 0x1
    path = write_model(tmp_path, "depth", mats, {"g.tga": green, "r.tga": red}, [near, far])
    assert tuple(render(path).rgba[32, 32, :3]) == (0, 255, 0)


def test_translucent_geosets_draw_after_opaque_ones_by_priority_plane(tmp_path):
    white, half_red, half_blue = solid((255, 255, 255, 255)), solid((255, 0, 0, 128)), solid((0, 0, 255, 128))
    # File order: translucent blue (priority 2), translucent red (priority 1), opaque white behind both.
    blue = Material(priority_plane=2, layers=[Layer(filter_mode=2, texture_id=2, shading_flags=1)])
    red = Material(priority_plane=1, layers=[Layer(filter_mode=2, texture_id=1, shading_flags=1)])
    opaque = layer(0, texture=0)
    geosets = [quad(x=5.0, material=0), quad(x=5.0, material=1), quad(x=-5.0, half=30.0, material=2)]
    path = write_model(tmp_path, "order", [blue, red, opaque], {"w.tga": white, "r.tga": half_red,
                                                                  "b.tga": half_blue}, geosets)
    got = render(path).rgba[32, 32, :3].astype(int)
    # white, then red at 50%, then blue at 50% on top: blue dominates over red.
    w = np.array([255, 255, 255])
    after_red = np.array([255, 0, 0]) * 128 / 255 + w * (1 - 128 / 255)
    after_blue = np.array([0, 0, 255]) * 128 / 255 + after_red * (1 - 128 / 255)
    np.testing.assert_allclose(got, after_blue, atol=2)


def test_billboarded_quad_faces_the_camera(tmp_path):
    side = "0,100,0:0,0,0:0,0,1:40"  # from +Y: the quad (facing +X) is seen edge-on
    path = write_model(tmp_path, "flat", [layer(0, flags=0x11)], {"w.tga": solid((255, 255, 255, 255))}, [quad()])
    flat = int((render(path, camera=side).rgba[..., 0] == 255).sum())
    m = load_model(path)
    m.helpers = [Helper(name="Face", object_id=1, flags=0x8)]  # Billboarded
    m.pivots = np.zeros((2, 3), "<f4")
    m.geosets[0].matrix_indices = np.array([1], "<u4")
    save_mdx(m, path)
    faced = int((render(path, camera=side).rgba[..., 0] == 255).sum())
    assert flat < 40  # edge-on: a line at most
    assert faced > 600  # billboarded: the full square turns to the camera
