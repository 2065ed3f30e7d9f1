"""Layer filter modes and UV sets on hand-built quads: the right pixels, computed by hand."""

from __future__ import annotations

import numpy as np
import pytest
from render_util import layer, quad, render, solid, write_model

BG = np.array([0x40, 0x80, 0xC0]) / 255.0
TEX = np.array([200, 100, 50, 128])


def expected(mode: int, tex=TEX) -> np.ndarray:
    c, a = tex[:3] / 255.0, tex[3] / 255.0
    out = {
        0: c,
        1: c if a >= 0.75 else BG,
        2: c * a + BG * (1 - a),
        3: np.minimum(c * a + BG, 1),
        4: np.minimum(c * a + BG, 1),
        5: BG * c,
        6: np.minimum(2 * BG * c, 1),
    }[mode]
    return np.round(out * 255)


@pytest.mark.parametrize("mode", range(7), ids=["None", "Transparent", "Blend", "Additive", "AddAlpha",
                                                 "Modulate", "Modulate2x"])
def test_filter_mode_blend_arithmetic(tmp_path, mode):
    path = write_model(tmp_path, f"mode{mode}", [layer(mode)], {"tex.tga": solid(TEX)}, [quad()])
    frame = render(path)
    centre = frame.rgba[32, 32].astype(int)
    np.testing.assert_allclose(centre[:3], expected(mode), atol=2)
    assert centre[3] == 255  # over an opaque background every mode stays opaque
    # Outside the quad: the background, untouched.
    np.testing.assert_array_equal(frame.rgba[1, 1], [0x40, 0x80, 0xC0, 255])


def test_transparent_keeps_texels_above_the_alpha_test(tmp_path):
    tex = np.array([10, 220, 30, 200])
    path = write_model(tmp_path, "alphatest", [layer(1)], {"tex.tga": solid(tex)}, [quad()])
    np.testing.assert_allclose(render(path).rgba[32, 32, :3], tex[:3], atol=1)


def test_opaque_layer_over_transparent_background_is_opaque(tmp_path):
    path = write_model(tmp_path, "opaque", [layer(0)], {"tex.tga": solid(TEX)}, [quad()])
    frame = render(path, background="transparent")
    assert frame.rgba[32, 32, 3] == 255 and frame.rgba[1, 1, 3] == 0


def _two_colour() -> np.ndarray:
    img = np.zeros((8, 8, 4), np.uint8)
    img[:, :4] = (255, 0, 0, 255)
    img[:, 4:] = (0, 0, 255, 255)
    return img


@pytest.mark.parametrize("coord,colour", [(0, (255, 0, 0)), (1, (0, 0, 255))])
def test_each_layer_samples_the_uv_set_its_coord_id_names(tmp_path, coord, colour):
    left = np.full((4, 2), [0.25, 0.5], "<f4")  # red half
    right = np.full((4, 2), [0.75, 0.5], "<f4")  # blue half
    g = quad(uv_sets=[left, right])
    path = write_model(tmp_path, f"uv{coord}", [layer(0, coord=coord)], {"two.tga": _two_colour()}, [g])
    np.testing.assert_allclose(render(path).rgba[32, 32, :3], colour, atol=1)


def test_two_layer_material_uses_each_layers_own_uv_set(tmp_path):
    from renderer.model import Layer, Material

    left = np.full((4, 2), [0.25, 0.5], "<f4")
    right = np.full((4, 2), [0.75, 0.5], "<f4")
    mat = Material(layers=[Layer(filter_mode=0, texture_id=0, shading_flags=1, coord_id=0),
                           Layer(filter_mode=5, texture_id=1, shading_flags=1, coord_id=1)])
    grey = np.zeros((8, 8, 4), np.uint8)
    grey[:, :4] = (64, 64, 64, 255)  # what set 0 would sample
    grey[:, 4:] = (128, 255, 128, 255)  # what set 1 samples
    path = write_model(tmp_path, "twolayer", [mat], {"two.tga": _two_colour(), "mod.tga": grey},
                       [quad(uv_sets=[left, right])])
    # Layer 0 (set 0): red. Layer 1 modulates with the texel set 1 picks: (128,255,128) -> red * 0.5.
    np.testing.assert_allclose(render(path).rgba[32, 32, :3], [128, 0, 0], atol=2)


def test_missing_texture_draws_a_checker_and_reports_it(tmp_path):
    from renderer.model import Texture

    path = write_model(tmp_path, "missing", [layer(0)], {"tex.tga": solid(TEX)}, [quad(half=30)])
    from renderer.formats import load_model
    from renderer.formats.mdx import save_mdx

    m = load_model(path)
    m.textures = [Texture(path="Textures\\Nowhere.blp")]
    save_mdx(m, path)
    frame = render(path)
    px = frame.rgba[20:44, 20:44, :3].reshape(-1, 3)
    assert {tuple(p) for p in px} <= {(255, 0, 255), (0, 0, 0)} | {tuple(p) for p in px if 0 < p[0] < 255}
    assert any(tuple(p) == (255, 0, 255) for p in px) and any(tuple(p) == (0, 0, 0) for p in px)
    assert any("Nowhere.blp" in d.message for d in frame.diagnostics)
    white = render(path, missing_textures="white")
    np.testing.assert_array_equal(white.rgba[32, 32, :3], [255, 255, 255])
