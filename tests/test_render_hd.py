"""Reforged HD materials on a synthetic quad: each of the six slots changes the pixels as the rules
in renderer.rules ("Reforged HD materials") say. `expected` restates that shading in numpy."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image
from render_util import FRONT_CAMERA, quad, renderer

from renderer.formats import load_model
from renderer.formats.mdx import save_mdx
from renderer.formats.textures import team_color
from renderer.frame import FrameSpec
from renderer.model import Bone, Layer, Material, Model, Sequence, Texture, TextureSlot
from renderer.rules import HD_NEUTRAL, HD_SLOTS, LIGHTING_VIEWER
from renderer.samples.build import extent_of
from renderer.tangents import generate_tangents

N, T, W = np.array([1.0, 0, 0]), np.array([0, 1.0, 0]), 1.0  # the quad's normal, TANG tangent, handedness
EYE = np.array([100.0, 0, 0])


def hd_model(tmp_path, slots: dict, version=1000, tangents=True, gain=1.0, name="hd") -> Model:
    """A quad facing +X with one HD material; `slots` maps slot names to RGBA texels (or "team")."""
    m = Model(version=version, name=name)
    m.sequences = [Sequence(name="Stand", interval=(0, 1000))]
    ids = []
    for slot in HD_SLOTS:
        value = slots.get(slot)
        if value is None:
            m.textures.append(Texture(path=f"missing_{slot}.tga"))
        elif value == "team":
            m.textures.append(Texture(replaceable_id=1))
        else:
            Image.fromarray(np.full((4, 4, 4), value, np.uint8), "RGBA").save(tmp_path / f"{name}_{slot}.tga")
            m.textures.append(Texture(path=f"{name}_{slot}.tga"))
        ids.append(len(m.textures) - 1)
    if version >= 1100:
        m.materials = [Material(layers=[Layer(filter_mode=0, texture_id=ids[0], shader_type_id=1, emissive_gain=gain,
                                              textures=[TextureSlot(t, k) for k, t in enumerate(ids)])])]
    else:
        m.materials = [Material(shader="Shader_HD_DefaultUnit",
                                layers=[Layer(filter_mode=0, texture_id=t, emissive_gain=gain) for t in ids])]
    g = quad()
    if tangents:
        g.tangents = np.tile(np.array([*T, W], "<f4"), (len(g.vertices), 1))
    g.skin = np.tile(np.array([0, 0, 0, 0, 255, 0, 0, 0], "u1"), (len(g.vertices), 1))
    m.geosets = [g]
    m.bones = [Bone(name="Root", object_id=0, flags=0x100)]
    m.pivots = np.zeros((1, 3), "<f4")
    m.bind_pose = np.eye(4, 3, dtype="<f4").T.reshape(1, 12)
    m.extent = extent_of(g.vertices)
    path = tmp_path / f"{name}.mdx"
    save_mdx(m, path)
    return load_model(path)


def pixel(model) -> np.ndarray:
    f = renderer().render(model, FrameSpec(width=64, height=64, camera=FRONT_CAMERA, background="#000000"))
    return f.rgba[32, 32, :3].astype(float)


def schlick(c, f0):
    return f0 + (1 - f0) * (1 - np.clip(c, 0, 1)) ** 5


def expected(slots: dict, gain=1.0, env_found=None) -> np.ndarray:
    """The rules' shading at the quad's centre (position 0, V = +X, L = +Z), in 0..255."""
    def tex(slot):
        v = slots.get(slot)
        if v == "team":
            return np.array([*team_color(0), 255]) / 255
        return np.array(v if v is not None else HD_NEUTRAL[slot], float) / 255

    albedo = tex("diffuse")[:3]
    orm = tex("orm")
    albedo = albedo * (1 - orm[3]) + albedo * tex("team_color")[:3] * orm[3]
    xy = tex("normal")[:2] * 2 - 1
    ts = np.array([*xy, np.sqrt(max(1 - xy @ xy, 0))])
    b = np.cross(N, T) * W
    n = T * ts[0] + b * ts[1] + N * ts[2]
    n /= np.linalg.norm(n)
    light, v = np.array(LIGHTING_VIEWER.to_light((0, 0, 0))), EYE / np.linalg.norm(EYE)
    r, metal = np.clip(orm[1], 0.04, 1), orm[2]
    f0 = 0.04 * (1 - metal) + albedo * metal
    rgb = albedo * LIGHTING_VIEWER.factor(n) * orm[0]
    nl, nv = max(n @ light, 0), max(n @ v, 1e-4)
    if nl > 0:
        h = (light + v) / np.linalg.norm(light + v)
        a2, nh = r ** 4, max(n @ h, 0)
        d = a2 / (np.pi * (nh * nh * (a2 - 1) + 1) ** 2)
        k = (r + 1) ** 2 / 8
        g = nl / (nl * (1 - k) + k) * nv / (nv * (1 - k) + k)
        rgb = rgb + schlick(h @ v, f0) * d * g / (4 * nl * nv) * nl
    if slots.get("environment") is not None:
        refl = 2 * (n @ v) * n - v
        assert env_found is not None
        env = env_found(refl)
    else:
        env = tex("environment")[:3]
    rgb = rgb + env * schlick(nv, f0) * (1 - r)
    rgb = rgb + tex("emissive")[:3] * gain
    return np.clip(rgb, 0, 1) * 255


GREY = (128, 128, 128, 255)


def check(tmp_path, slots, **kw):
    got = pixel(hd_model(tmp_path, slots, **{k: v for k, v in kw.items() if k != "env_found"}))
    want = expected(slots, kw.get("gain", 1.0), kw.get("env_found"))
    np.testing.assert_allclose(got, want, atol=2.5)
    return got


def test_diffuse_only_is_lit_by_the_frame_rule(tmp_path):
    got = check(tmp_path, {"diffuse": GREY})
    np.testing.assert_allclose(got, [128 * 0.7] * 3, atol=2.5)  # neutral slots: N . L = 0, ambient 0.7


def test_the_normal_map_tilts_the_normal_in_tangent_space(tmp_path):
    flat = pixel(hd_model(tmp_path, {"diffuse": GREY}, name="flat"))
    tilted = check(tmp_path, {"diffuse": GREY, "normal": (128, 153, 255, 255)})  # +0.2 along B = +Z: towards L
    assert tilted[0] > flat[0] + 20


def test_generated_tangents_match_tang_when_tang_is_absent(tmp_path):
    g = quad()
    gen = generate_tangents(g.vertices, g.normals, g.uv_sets[0], g.triangles)
    assert np.allclose(gen[:, :3], T) and np.all(gen[:, 3] == -1)  # v grows downwards: B = -Z
    slots = {"diffuse": GREY, "normal": (128, 153, 255, 255)}
    with_tang = pixel(hd_model(tmp_path, slots, name="tang"))
    without = pixel(hd_model(tmp_path, slots, tangents=False, name="gen"))
    assert without[0] < with_tang[0] - 20  # the generated B points down, away from the light


def test_orm_occlusion_darkens_the_diffuse_term(tmp_path):
    got = check(tmp_path, {"diffuse": GREY, "orm": (128, 255, 0, 0)})
    np.testing.assert_allclose(got, [128 * 0.7 * 128 / 255] * 3, atol=2.5)


def test_orm_roughness_and_metallic_give_a_specular_highlight(tmp_path):
    base = {"diffuse": (64, 64, 64, 255), "normal": (128, 218, 255, 255)}  # N' half-way between V and L
    dull = check(tmp_path, base)
    shiny = check(tmp_path, {**base, "orm": (255, 178, 255, 0)})  # roughness 0.7, metallic 1
    assert shiny[0] > dull[0] + 15


def test_team_colour_goes_through_the_orm_alpha_mask(tmp_path):
    masked = check(tmp_path, {"diffuse": (255, 255, 255, 255), "orm": (255, 255, 0, 255), "team_color": "team"})
    r, g, b = team_color(0)
    np.testing.assert_allclose(masked, np.array([r, g, b]) * 0.7, atol=2.5)
    unmasked = check(tmp_path, {"diffuse": (255, 255, 255, 255), "orm": (255, 255, 0, 0), "team_color": "team"})
    np.testing.assert_allclose(unmasked, [255 * 0.7] * 3, atol=2.5)


@pytest.mark.parametrize("version", [1000, 1100])
def test_emissive_is_added_times_its_gain(tmp_path, version):
    got = check(tmp_path, {"diffuse": (0, 0, 0, 255), "emissive": (0, 100, 40, 255)}, gain=1.5, version=version)
    np.testing.assert_allclose(got, [0, 150, 60], atol=2.5)


def test_a_missing_emissive_adds_nothing(tmp_path):
    got = check(tmp_path, {"diffuse": (0, 0, 0, 255)})
    np.testing.assert_allclose(got, [0, 0, 0], atol=1)


def test_a_found_environment_is_reflected(tmp_path):
    blue = (0, 0, 255, 255)
    smooth = {"diffuse": GREY, "orm": (255, 10, 255, 0)}  # roughness 0.04 (clamped), metallic 1: F0 = albedo
    neutral = check(tmp_path, smooth)  # not found: the neutral grey constant
    found = check(tmp_path, {**smooth, "environment": blue}, env_found=lambda refl: np.array([0, 0, 1.0]))
    assert found[2] > neutral[2] + 40 and found[0] < neutral[0] - 40


@pytest.mark.parametrize("version", [1000, 1100])
def test_inspect_shows_the_hd_slots(tmp_path, version):
    from renderer.summary import format_text, summarize

    m = hd_model(tmp_path, {"diffuse": GREY, "team_color": "team"}, version=version)
    s = summarize(m)
    assert s["materials"][0]["hd_slots"] == [{"layer": 0, **{slot: k for k, slot in enumerate(HD_SLOTS)}}]
    text = format_text(s)
    assert "HD layer 0: diffuse 0 'hd_diffuse.tga', normal 1 'missing_normal.tga'" in text
    assert "team_color 4 replaceable 1" in text


def test_an_1100_material_draws_every_layer_as_its_own_pass(tmp_path):
    m = hd_model(tmp_path, {"diffuse": (0, 0, 0, 255)}, version=1100, name="passes")
    Image.fromarray(np.full((4, 4, 4), (0, 0, 200, 255), np.uint8), "RGBA").save(tmp_path / "blue.tga")
    m.textures.append(Texture(path="blue.tga"))
    m.materials[0].layers.append(Layer(filter_mode=3, texture_id=len(m.textures) - 1, shading_flags=0x1))  # Additive
    save_mdx(m, tmp_path / "passes.mdx")
    np.testing.assert_allclose(pixel(load_model(tmp_path / "passes.mdx")), [0, 0, 200], atol=2.5)


@pytest.mark.parametrize("version", [1000, 1100])
def test_an_unshaded_hd_layer_shows_albedo_plus_emissive_unlit(tmp_path, version):
    """The Unshaded flag on an HD layer (its own program variant): no light, no specular, no
    environment; team colour through the ORM mask and the emissive slot still apply."""
    slots = {"diffuse": (200, 100, 50, 255), "orm": (255, 128, 0, 128), "team_color": "team",
             "emissive": (10, 20, 30, 255)}
    model = hd_model(tmp_path, slots, version=version, gain=2.0)
    for lay in model.materials[0].layers:
        lay.shading_flags |= 0x1
    got = pixel(model)
    albedo = np.array(slots["diffuse"][:3]) / 255
    mask = 128 / 255
    albedo = albedo * (1 - mask) + albedo * np.array(team_color(0)) / 255 * mask
    want = np.clip(albedo + np.array(slots["emissive"][:3]) / 255 * 2.0, 0, 1) * 255
    np.testing.assert_allclose(got, want, atol=1.5)
    shaded = pixel(hd_model(tmp_path, slots, version=version, gain=2.0, name="lit"))
    assert np.abs(shaded - got).max() > 10  # the shaded variant is lit: the flag changes the pixel
