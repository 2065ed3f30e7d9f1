"""Model lights (LITE, renderer.rules "Model lights"): hand-made quads lit by an omni, a directional
and an ambient light, visibility, colour order, the cap, and lights off giving today's bytes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import corpus_path
from render_util import FRONT_CAMERA, layer, quad, renderer, solid, write_model

from renderer.formats import load_model
from renderer.formats.mdx import save_mdx
from renderer.frame import FrameSpec
from renderer.gl.model_program import MAX_LIGHTS, fragment_source
from renderer.lights import frame_lights
from renderer.model import Bone, Light
from renderer.rules import LIGHT_RULE, MAX_MODEL_LIGHTS, light_attenuation
from renderer.samples.build import track

GREY = 100  # texel value; the viewer rule gives a +X quad the factor 0.7 -> 70
BASE = 70


def lit_model(tmp_path, lights, pivots, name="lights", bones=()):
    """The +X quad of render_util with `lights` (object ids from 1) at `pivots`, saved and reloaded."""
    path = write_model(tmp_path, name, [layer(0, flags=0)], {"grey.tga": solid((GREY, GREY, GREY, 255))},
                       [quad()])
    m = load_model(path)
    m.bones += list(bones)
    m.lights = list(lights)
    m.pivots = np.array([(0, 0, 0), *[(0, 0, 0)] * len(bones), *pivots], "<f4")
    save_mdx(m, path)
    return load_model(path)


def omni(oid, **kw):
    return Light(name=kw.pop("name", f"Omni{oid}"), object_id=oid, flags=0x200, type=0, **kw)


def draw(model, lights="model", size=64):
    return renderer().render(model, FrameSpec(width=size, height=size, camera=FRONT_CAMERA, background="#4080c0",
                                              lights=lights))


def centre(frame):
    h, w = frame.rgba.shape[:2]
    return frame.rgba[h // 2, w // 2].astype(int)


def test_the_shader_bound_matches_the_rule_and_off_compiles_no_loop():
    assert MAX_LIGHTS == MAX_MODEL_LIGHTS == 8
    assert "#define LIGHTS 0" in fragment_source(False) and "#define LIGHTS 8" in fragment_source(True, 8)
    assert FrameSpec().lights == "off"
    with pytest.raises(ValueError, match="model"):
        FrameSpec(lights="sun")


def test_attenuation_rule():
    assert light_attenuation(5, 10, 20) == 1.0 and light_attenuation(15, 10, 20) == 0.5
    assert light_attenuation(20, 10, 20) == 0.0 and light_attenuation(99, 10, 20) == 0.0
    assert light_attenuation(5, 10, 10) == 1.0 and light_attenuation(11, 10, 10) == 0.0


def test_lights_off_gives_the_bytes_of_a_model_without_lights(tmp_path):
    plain = lit_model(tmp_path, [], [], name="plain")
    lamp = lit_model(tmp_path, [omni(1, attenuation_start=100, attenuation_end=200, color=(1, 0, 0), intensity=1)],
                     [(10, 0, 0)])
    before = draw(plain, "off")
    assert "lights" not in before.trace
    on = draw(lamp)  # the light variants are built and used in between
    off = draw(lamp, "off")
    again = draw(plain, "off")
    assert np.array_equal(before.rgba, off.rgba) and np.array_equal(before.rgba, again.rgba)
    assert not np.array_equal(on.rgba, off.rgba)
    assert "lights" not in off.trace and on.trace["lights"] == f"model: {LIGHT_RULE}"
    np.testing.assert_allclose(centre(off)[:3], [BASE] * 3, atol=1.5)


def test_an_omni_light_brightens_by_its_colour_and_attenuates_to_nothing(tmp_path):
    # 10 units in front of the quad's centre, red, intensity 1; full strength up to 100: N.L = 1 at the centre.
    near = lit_model(tmp_path, [omni(1, attenuation_start=100, attenuation_end=200, color=(1, 0, 0), intensity=1)],
                     [(10, 0, 0)], name="near")
    np.testing.assert_allclose(centre(draw(near))[:3], [GREY * 1.7, BASE, BASE], atol=1.5)
    # Linear falloff from 5 to 15: a third of the light at the centre (d = 10), nothing past 15 units.
    fall = lit_model(tmp_path, [omni(1, attenuation_start=5, attenuation_end=15, color=(1, 0, 0), intensity=1)],
                     [(10, 0, 0)], name="fall")
    f, off = draw(fall), draw(fall, "off")
    np.testing.assert_allclose(centre(f)[:3], [GREY * (0.7 + 0.5), BASE, BASE], atol=1.5)
    lights = frame_lights(fall, renderer()._pose(fall, FrameSpec(camera=FRONT_CAMERA))[3])
    assert lights.count == 1
    np.testing.assert_allclose(lights.contribution((1, 0, 0), (0, 0, 0)), [0.5, 0, 0])
    # 1.137 model units a pixel (fov 40 at 100): 14 pixels off centre is 16 units along the quad,
    # sqrt(10^2 + 16^2) > 15 from the light: exactly the unlit pixel.
    row = f.rgba[32]
    assert np.array_equal(row[32 - 14], off.rgba[32, 32 - 14]) and np.array_equal(row[32 + 15], off.rgba[32, 32 + 15])
    assert int(row[32 - 4, 0]) > int(row[32 - 8, 0]) > BASE + 3  # falling off towards the edge
    # Past attenuation end everywhere on the quad: the frame is the unlit one.
    far = lit_model(tmp_path, [omni(1, attenuation_start=1, attenuation_end=5, color=(1, 1, 1), intensity=3)],
                    [(10, 0, 0)], name="far")
    assert np.array_equal(draw(far).rgba, draw(far, "off").rgba)


def test_a_directional_light_follows_its_node_rotation_and_is_not_attenuated(tmp_path):
    q = np.sin(np.pi / 4)  # 90 degrees about Y: local +Z (towards the light) turns to +X, facing the quad
    sun = Light(name="Sun", object_id=1, flags=0x200, type=1, attenuation_start=0, attenuation_end=1,
                color=(0, 1, 0), intensity=0.5)
    sun.node_tracks["KGRT"] = track("KGRT", [0], [[0, q, 0, q]])
    m = lit_model(tmp_path, [sun], [(1000, 0, 0)])
    np.testing.assert_allclose(centre(draw(m))[:3], [BASE, GREY * 1.2, BASE], atol=1.5)
    flat = Light(name="Sun", object_id=1, flags=0x200, type=1, color=(0, 1, 0), intensity=0.5)  # from above
    m = lit_model(tmp_path, [flat], [(1000, 0, 0)], name="above")
    np.testing.assert_allclose(centre(draw(m))[:3], [BASE] * 3, atol=1.5)  # N.L = 0 on the +X quad


def test_an_ambient_light_adds_its_ambient_colour_everywhere_in_range(tmp_path):
    amb = Light(name="Amb", object_id=1, flags=0x200, type=2, attenuation_start=500, attenuation_end=1000,
                color=(1, 1, 1), intensity=5, ambient_color=(0, 0, 1), ambient_intensity=0.3)
    f = draw(lit_model(tmp_path, [amb], [(0, 0, 0)]))
    for px in (f.rgba[32, 32], f.rgba[24, 40], f.rgba[40, 22]):
        np.testing.assert_allclose(px[:3].astype(int), [BASE, BASE, GREY * 1.0], atol=1.5)


def test_klav_zero_turns_a_light_off_and_klac_tracks_are_bgr(tmp_path):
    hidden = omni(1, attenuation_start=100, attenuation_end=200, color=(1, 0, 0), intensity=1)
    hidden.tracks["KLAV"] = track("KLAV", [0], [0.0], interpolation=0)
    m = lit_model(tmp_path, [hidden], [(10, 0, 0)], name="hidden")
    assert np.array_equal(draw(m).rgba, draw(m, "off").rgba)
    tracked = omni(1, attenuation_start=100, attenuation_end=200, color=(1, 1, 1), intensity=1)
    tracked.tracks["KLAC"] = track("KLAC", [0], [[1, 0, 0]])  # B, G, R: blue
    m = lit_model(tmp_path, [tracked], [(10, 0, 0)], name="tracked")
    np.testing.assert_allclose(centre(draw(m))[:3], [BASE, BASE, GREY * 1.7], atol=1.5)


def test_a_light_moves_with_its_parent_node():
    from renderer.anim import pose_at
    from renderer.model import Model, Sequence

    m = Model(version=800, name="moving")
    m.sequences = [Sequence(name="Stand", interval=(0, 1000))]
    bone = Bone(name="Root", object_id=0, flags=0x100)
    bone.node_tracks["KGTR"] = track("KGTR", [0, 1000], [[0, 0, 0], [0, 50, 0]])
    m.bones = [bone]
    m.lights = [omni(1, parent_id=0, attenuation_end=10, intensity=1)]
    m.pivots = np.array([(0, 0, 0), (5, 0, 0)], "<f4")
    np.testing.assert_allclose(frame_lights(m, pose_at(m, 0, 500)).position[0], [5, 25, 0], atol=1e-6)


def test_more_lights_than_the_cap_are_dropped_with_a_diagnostic(tmp_path):
    lamps = [omni(i + 1, attenuation_start=100, attenuation_end=200, color=(0.05, 0, 0), intensity=1)
             for i in range(MAX_MODEL_LIGHTS + 1)]
    m = lit_model(tmp_path, lamps, [(10, 0, 0)] * len(lamps))
    f = draw(m)
    np.testing.assert_allclose(centre(f)[:3], [GREY * (0.7 + 0.05 * MAX_MODEL_LIGHTS), BASE, BASE], atol=1.5)
    notes = [d.message for d in f.diagnostics if d.where == "lights"]
    assert len(notes) == 1 and "Omni9" in notes[0] and "first 8" in notes[0]
    assert not [d for d in draw(m, "off").diagnostics if d.where == "lights"]


CORPUS_LIGHTS = ["stijnherfst__HiveWE/tests/fixtures/mdl/minimal_v800.mdl",
                 "stijnherfst__HiveWE/tests/fixtures/mdl/skin_v900.mdl",
                 "tdauth__wc3lib/src/mdlx/test/mdl/lights.mdl"]


@pytest.mark.parametrize("rel", CORPUS_LIGHTS)
def test_corpus_models_with_lights_render(rel):
    from renderer.formats import load_model

    model = load_model(corpus_path(rel))
    assert model.lights
    spec = FrameSpec(width=96, height=96)
    on = renderer().render(model, FrameSpec(width=96, height=96, lights="model"))
    off = renderer().render(model, spec)
    assert on.rgba.shape == off.rgba.shape and "lights" in on.trace
    adds = frame_lights(model, renderer()._pose(model, spec)[3])
    if model.geosets and (adds.diffuse[:adds.count].any() or adds.ambient[:adds.count].any()):
        assert not np.array_equal(on.rgba, off.rgba)


def test_farm_render_lights_model(tmp_path):
    from farm.cli import main
    from renderer.png import read_png

    lit_model(tmp_path, [omni(1, attenuation_start=100, attenuation_end=200, color=(1, 0, 0), intensity=1)],
              [(10, 0, 0)])
    args = [str(tmp_path / "lights.mdx"), "--size", "64x64", "--camera", FRONT_CAMERA, "--background", "#4080c0"]
    assert main(["render", *args, "-o", str(tmp_path / "on.png"), "--lights", "model"]) == 0
    assert main(["render", *args, "-o", str(tmp_path / "off.png")]) == 0
    on, on_trace = read_png(tmp_path / "on.png")
    off, off_trace = read_png(tmp_path / "off.png")
    assert on_trace["lights"] == f"model: {LIGHT_RULE}" and "lights" not in off_trace
    np.testing.assert_allclose(on[32, 32, :3].astype(int), [GREY * 1.7, BASE, BASE], atol=1.5)


def test_hd_layers_are_lit_by_model_lights_too(tmp_path):
    from test_render_hd import GREY as HD_GREY
    from test_render_hd import hd_model

    m = hd_model(tmp_path, {"diffuse": HD_GREY})
    m.lights = [omni(1, attenuation_start=100, attenuation_end=200, color=(1, 0, 0), intensity=1)]
    m.pivots = np.array([(0, 0, 0), (10, 0, 0)], "<f4")
    f = renderer().render(m, FrameSpec(width=64, height=64, camera=FRONT_CAMERA, background="#000000",
                                       lights="model"))
    # Neutral slots: no specular from either light, occlusion 1; the light adds to the diffuse factor.
    np.testing.assert_allclose(centre(f)[:3], [128 * 1.7, 128 * 0.7, 128 * 0.7], atol=2.5)
