"""The lighting rules of renderer.rules on hand-made quads: pixel values for each named rule."""

from __future__ import annotations

import numpy as np
import pytest
from render_util import layer, quad, render, solid, write_model

from renderer.frame import FrameSpec
from renderer.rules import (
    DEFAULT_LIGHTING,
    LIGHTING_FARM_V0,
    LIGHTING_RULES,
    LIGHTING_VIEWER,
    RENDER_RULE,
    lighting_rule,
)

WHITE = solid((255, 255, 255, 255))
TILTED = (0.9798, 0.0, 0.2)  # a unit normal with N . (0, 0, 1) = 0.2


def lit_quad(tmp_path, normal, x=0.0, back=False, name="lit"):
    g = quad(x=x)
    g.normals = np.tile(np.array(normal, "<f4"), (len(g.vertices), 1))
    if back:  # wound clockwise seen from +X: the camera sees its back face
        g.faces = g.faces.reshape(-1, 3)[:, ::-1].reshape(-1).copy()
    flags = 0x10 if back else 0x0  # shaded; two-sided for the back-face case
    return write_model(tmp_path, name, [layer(0, flags=flags)], {"white.tga": WHITE}, [g])


def centre(frame) -> np.ndarray:
    h, w = frame.rgba.shape[:2]
    return frame.rgba[h // 2, w // 2].astype(int)


def test_the_viewer_rule_is_the_default_and_named_in_the_trace(tmp_path):
    assert DEFAULT_LIGHTING == "viewer" and FrameSpec().lighting == "viewer"
    f = render(lit_quad(tmp_path, TILTED))
    assert f.trace["lighting"] == LIGHTING_VIEWER.describe()
    assert f.trace["render_rule"] == RENDER_RULE
    assert f.trace["lighting"].startswith("viewer: min(0.7 + 1 clamp(N.L, 0, 1), 1), L point (0,0,10000)")
    g = render(lit_quad(tmp_path, TILTED), lighting="farm-v0")
    assert g.trace["lighting"].startswith("farm-v0: min(0.4 + 0.75 clamp(N.L, 0, 1), 1), L direction")


def test_the_rule_travels_with_the_png(tmp_path):
    from renderer.png import read_png, write_png

    f = render(lit_quad(tmp_path, TILTED), lighting="farm-v0")
    write_png(tmp_path / "f.png", f.rgba, f.trace)
    assert read_png(tmp_path / "f.png")[1]["lighting"] == LIGHTING_FARM_V0.describe()


def test_unknown_rule_names_are_refused():
    with pytest.raises(ValueError, match="farm-v0"):
        FrameSpec(lighting="sunny")
    assert set(LIGHTING_RULES) == {"viewer", "farm-v0"}


@pytest.mark.parametrize("rule, expected", [("viewer", 0.9), ("farm-v0", 0.4 + 0.75 * (0.3 * 0.9798 + 0.866 * 0.2))])
def test_front_face_pixel_values(tmp_path, rule, expected):
    f = render(lit_quad(tmp_path, TILTED), lighting=rule)
    assert lighting_rule(rule).factor(TILTED) == pytest.approx(expected, abs=1e-3)
    np.testing.assert_allclose(centre(f)[:3], [255 * expected] * 3, atol=1.5)


def test_a_normal_facing_away_from_the_light_gets_the_ambient_only(tmp_path):
    f = render(lit_quad(tmp_path, (0.0, 0.0, -1.0)))
    np.testing.assert_allclose(centre(f)[:3], [255 * 0.7] * 3, atol=1.5)


@pytest.mark.parametrize("rule, expected", [
    ("viewer", 0.9),  # no flip: the back face keeps N, N . L = 0.2
    ("farm-v0", 0.4 + 0.75 * (0.3 * 0.9798 - 0.866 * 0.2)),  # flipped: -N . L
])
def test_back_faces(tmp_path, rule, expected):
    n = (-TILTED[0], 0.0, TILTED[2])
    f = render(lit_quad(tmp_path, n, back=True), lighting=rule)
    assert lighting_rule(rule).factor(n, front=False) == pytest.approx(expected, abs=1e-3)
    np.testing.assert_allclose(centre(f)[:3], [255 * expected] * 3, atol=1.5)


def test_the_viewer_light_is_a_point_in_model_space(tmp_path):
    # At x = 10000 the light at (0, 0, 10000) lies at 45 degrees: L = (-0.707, 0, 0.707).
    n = (0.6, 0.0, 0.8)
    f = render(lit_quad(tmp_path, n, x=10000.0), camera="10100,0,0:10000,0,0:0,0,1:40")
    expected = 0.7 + (-0.6 + 0.8) / np.sqrt(2)
    assert LIGHTING_VIEWER.factor(n, (10000.0, 0.0, 0.0)) == pytest.approx(expected)
    np.testing.assert_allclose(centre(f)[:3], [255 * expected] * 3, atol=1.5)
    # The same normal at the origin is fully lit (L = +Z): a directional light could not do both.
    assert LIGHTING_VIEWER.factor(n) == 1.0
    assert LIGHTING_FARM_V0.factor(n, (10000.0, 0.0, 0.0)) == LIGHTING_FARM_V0.factor(n)
