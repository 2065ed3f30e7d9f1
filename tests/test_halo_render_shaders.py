"""Halo shader flags on pixels: unknown shaders draw two-sided in their flat colour; a shader that was
read keeps its own two-sided and alpha-tested flags."""

from __future__ import annotations

import numpy as np
import pytest
from render_util import renderer  # noqa: I001  (sets the EGL environment before GL is touched)
from test_halo_shaders import RED, load_tree
from test_halo_tagbuild import bitmap_tag, shader_model, uncompressed

from renderer.formats.halo.shaders import UNKNOWN_SHADER_DRAWN, flat_color
from renderer.frame import FrameSpec

ABOVE, BELOW = "0,0,10:0,0,0:0,1,0:40", "0,0,-10:0,0,0:0,1,0:40"
BG = [0, 0, 0]
CLEAR_RED = bitmap_tag(1, 1, 11, bytes([0, 0, 255, 0]))  # red, alpha 0


def big_triangle(tmp_path, files, shaders):
    """The loaded model and its context (its bitmaps: renderer.context)."""
    u = uncompressed([(-1, -1, 0), (3, -1, 0), (-1, 3, 0)], uvs=[(0, 0), (1, 0), (0, 1)])
    return load_tree(tmp_path, files, shaders, parts=[{"shader": 0, "uncompressed": u, "strip": [0, 1, 2]}])


def centre(loaded, camera) -> list[int]:
    spec = FrameSpec(width=32, height=32, camera=camera, background="#000000")
    f = renderer().render(loaded.model, spec, context=loaded.context)
    return f.rgba[16, 16, :3].astype(int).tolist()


def test_a_missing_shader_is_drawn_two_sided_in_its_flat_colour(tmp_path):
    m = big_triangle(tmp_path, {}, [(b"soso", "s\\gone")])
    assert any(UNKNOWN_SHADER_DRAWN in d.message for d in m.model.diagnostics)
    assert m.model.info["shaders"][0]["two_sided"] is True
    flat = list(flat_color("s\\gone")[:3])
    assert centre(m, ABOVE) == flat and centre(m, BELOW) == flat


@pytest.mark.parametrize("cls, name", [(b"sgla", "s\\glass"), (b"soso", "..\\outside")])
def test_unsupported_and_refused_shaders_are_two_sided_too(tmp_path, cls, name):
    m = big_triangle(tmp_path, {"s/glass.shader_transparent_glass": b"x"}, [(cls, name)])
    flat = list(flat_color(name)[:3])
    assert centre(m, ABOVE) == flat and centre(m, BELOW) == flat


def test_a_read_shader_keeps_its_culling(tmp_path):
    one = big_triangle(tmp_path / "one", {"s/o.shader_model": shader_model("b\\red", flags=4), "b/red.bitmap": RED},
                       [(b"soso", "s\\o")])
    seen = [centre(one, ABOVE), centre(one, BELOW)]
    assert sorted(seen) == sorted([[255, 0, 0], BG])  # one side culled
    two = big_triangle(tmp_path / "two", {"s/t.shader_model": shader_model("b\\red", flags=4 | 2),
                                          "b/red.bitmap": RED}, [(b"soso", "s\\t")])
    assert centre(two, ABOVE) == centre(two, BELOW) == [255, 0, 0]


def test_alpha_tested_shaders_discard_clear_texels_and_opaque_ones_do_not(tmp_path):
    files = {"s/cut.shader_model": shader_model("b\\clear", flags=2), "b/clear.bitmap": CLEAR_RED}
    cut = big_triangle(tmp_path / "cut", files, [(b"soso", "s\\cut")])
    assert centre(cut, ABOVE) == centre(cut, BELOW) == BG
    files = {"s/op.shader_model": shader_model("b\\clear", flags=4 | 2), "b/clear.bitmap": CLEAR_RED}
    opaque = big_triangle(tmp_path / "op", files, [(b"soso", "s\\op")])
    assert centre(opaque, ABOVE) == centre(opaque, BELOW) == [255, 0, 0]


def test_a_shader_index_out_of_range_gets_the_two_sided_fallback(tmp_path):
    u = uncompressed([(-1, -1, 0), (3, -1, 0), (-1, 3, 0)])
    m = load_tree(tmp_path, {}, [], parts=[{"shader": 3, "uncompressed": u, "strip": [0, 1, 2]}])
    assert any("two-sided" in d.message for d in m.model.diagnostics)
    assert m.model.materials[-1].layers[0].shading_flags & 0x10
    assert np.any(centre(m, ABOVE)) and centre(m, ABOVE) == centre(m, BELOW)
