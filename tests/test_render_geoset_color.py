"""GEOA colour order on a hand-made quad: the static colour is R, G, B, KGAC values are B, G, R."""

from __future__ import annotations

import numpy as np
from render_util import layer, quad, render, solid, write_model

from renderer.formats import load_model
from renderer.formats.mdx import save_mdx
from renderer.model import GeosetAnimation
from renderer.rules import GEOA_STATIC_COLOR_BGR, GEOA_TRACK_COLOR_BGR
from renderer.samples.build import track

WHITE = solid((255, 255, 255, 255))


def tinted(tmp_path, name, animation: GeosetAnimation):
    path = write_model(tmp_path, name, [layer(0, flags=0x1)], {"white.tga": WHITE}, [quad()])  # unshaded
    m = load_model(path)
    m.geoset_animations = [animation]
    save_mdx(m, path)
    return path


def centre(frame):
    return frame.rgba[32, 32].astype(int).tolist()


def test_the_rules():
    assert (GEOA_STATIC_COLOR_BGR, GEOA_TRACK_COLOR_BGR) == (False, True)


def test_static_colour_is_rgb(tmp_path):
    f = render(tinted(tmp_path, "static", GeosetAnimation(geoset_id=0, color=(1.0, 0.5, 0.0), flags=2)))
    np.testing.assert_allclose(centre(f), [255, 128, 0, 255], atol=1)


def test_kgac_values_are_bgr(tmp_path):
    kgac = track("KGAC", [0], [[1.0, 0.5, 0.0]], interpolation=0)
    f = render(tinted(tmp_path, "track", GeosetAnimation(geoset_id=0, color=(1, 1, 1), flags=2,
                                                          tracks={"KGAC": kgac})))
    np.testing.assert_allclose(centre(f), [0, 128, 255, 255], atol=1)
