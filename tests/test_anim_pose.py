"""Pose: texture animation matrices, geoset alpha/colour, layers, visibility, sequence lookup, and
batch == one-by-one."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mdx_build import everything

from renderer.anim import GEOSET_HIDDEN_ALPHA, Animator, UnknownSequence, find_sequence, pose_at
from renderer.anim.pose import uv_matrices
from renderer.model import (
    Attachment,
    Geoset,
    GeosetAnimation,
    Layer,
    Light,
    Material,
    Model,
    Sequence,
    TextureAnimation,
    TextureSlot,
)
from renderer.samples.build import crate, track


def q_z(deg):
    h = math.radians(deg) / 2
    return [0.0, 0.0, math.sin(h), math.cos(h)]


def base_model() -> Model:
    m = Model(version=1100, name="Pose")
    m.sequences = [Sequence(name="Stand 2", interval=(0, 1000)), Sequence(name="Stand 1", interval=(2000, 3000)),
                   Sequence(name="Attack", interval=(4000, 5000), flags=1)]
    m.geosets = [Geoset() for _ in range(3)]
    return m


# ------------------------------------------------------------------------------ texture animation


def test_uv_matrix_translate_rotate_scale_about_the_centre():
    m = uv_matrices([[0.25, 0.5, 0]], [q_z(90)], [[2, 3, 1]])[0]
    # (0.5, 0.5) + t = (0.75, 1.0); minus centre (0.25, 0.5); rotate 90°: (-0.5, 0.25);
    # scale (2, 3): (-1.0, 0.75); plus centre: (-0.5, 1.25)
    np.testing.assert_allclose(m @ [0.5, 0.5, 1], [-0.5, 1.25, 1], atol=1e-12)
    # (0, 0) + t = (0.25, 0.5) -> (-0.25, 0) -> rotate (0, -0.25) -> scale (0, -0.75) -> (0.5, -0.25)
    np.testing.assert_allclose(m @ [0, 0, 1], [0.5, -0.25, 1], atol=1e-12)
    np.testing.assert_allclose(uv_matrices([[0, 0, 0]], [[0, 0, 0, 1]], [[1, 1, 1]])[0], np.eye(3))


def test_texture_animation_in_a_pose():
    m = base_model()
    m.texture_animations = [
        TextureAnimation(tracks={"KTAT": track("KTAT", [0, 1000], [[0, 0, 0], [1, 0, 0]])}),
        TextureAnimation(tracks={"KTAR": track("KTAR", [0], [q_z(90)]), "KTAS": track("KTAS", [0], [[2, 2, 2]])}),
        TextureAnimation(),
    ]
    uv = Animator(m).pose(0, 250).uv_matrices
    np.testing.assert_allclose(uv[0], [[1, 0, 0.25], [0, 1, 0], [0, 0, 1]], atol=1e-12)
    np.testing.assert_allclose(uv[1][:2, :2], [[0, -2], [2, 0]], atol=1e-12)
    np.testing.assert_allclose(uv[1] @ [0.5, 0.5, 1], [0.5, 0.5, 1], atol=1e-12)
    np.testing.assert_allclose(uv[2], np.eye(3))


# ------------------------------------------------------------------------------ geoset animation


def test_geoset_alpha_and_colour_are_rgb_and_thresholded():
    m = base_model()
    m.geoset_animations = [
        GeosetAnimation(geoset_id=0, alpha=0.7, color=(0.1, 0.2, 0.3), flags=2),
        GeosetAnimation(geoset_id=1, alpha=1.0, color=(1, 1, 1), flags=2, tracks={
            "KGAO": track("KGAO", [0, 1000], [1.0, 0.0]),
            "KGAC": track("KGAC", [0, 1000], [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])}),
    ]
    a = Animator(m)
    p = a.pose(0, 250)
    np.testing.assert_allclose(p.geoset_alpha, [0.7, 0.75, 1.0])
    # static colour stored R, G, B; KGAC values stored B, G, R: both returned R, G, B
    np.testing.assert_allclose(p.geoset_color, [[0.1, 0.2, 0.3], [0.75, 0.0, 0.25], [1, 1, 1]])
    assert p.geoset_visible.tolist() == [True, True, True]
    hidden = a.pose(0, 995)  # alpha 0.005
    assert hidden.geoset_alpha[1] <= GEOSET_HIDDEN_ALPHA and not hidden.geoset_visible[1]
    m.geoset_animations.append(GeosetAnimation(geoset_id=2, alpha=GEOSET_HIDDEN_ALPHA))
    edge = Animator(m).pose(0, 0)  # alpha exactly at the threshold: hidden, the threshold is inclusive
    assert edge.geoset_alpha[2] == GEOSET_HIDDEN_ALPHA and not edge.geoset_visible[2]


def test_kgac_is_bgr_and_the_static_colour_it_overrides_is_rgb():
    m = base_model()
    m.geoset_animations = [GeosetAnimation(geoset_id=0, color=(0.1, 0.2, 0.3), flags=2, tracks={
        "KGAC": track("KGAC", [2000, 3000], [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])})]
    a = Animator(m)
    np.testing.assert_allclose(a.pose(None, 0).geoset_color[0], [0.1, 0.2, 0.3])  # no sequence: the static
    np.testing.assert_allclose(a.pose(1, 0).geoset_color[0], [1.0, 0.0, 0.0])  # key [0, 0, 1] is B, G, R


def test_last_geoset_animation_for_a_geoset_wins():
    m = base_model()
    m.geoset_animations = [GeosetAnimation(geoset_id=2, alpha=0.2), GeosetAnimation(geoset_id=2, alpha=0.4)]
    assert Animator(m).pose(0, 0).geoset_alpha[2] == pytest.approx(0.4)


# ------------------------------------------------------------------------------ layers


def test_layer_alpha_emissive_and_flipbook():
    m = base_model()
    flip = Layer(texture_id=5, alpha=0.9, emissive_gain=0.3, tracks={
        "KMTA": track("KMTA", [0, 1000], [0.0, 1.0]),
        "KMTE": track("KMTE", [0, 1000], [2.0, 4.0]),
        "KMTF": track("KMTF", [0, 300, 600], [1, 2, 3], interpolation=1)})
    static = Layer(texture_id=7, alpha=0.5, emissive_gain=0.25,
                   textures=[TextureSlot(7, 0), TextureSlot(8, 1, track("KMTF", [0, 500], [8, 9], interpolation=0))])
    m.materials = [Material(layers=[static]), Material(layers=[Layer(), flip])]
    a = Animator(m)
    p = a.pose(0, 450)
    i = p.layer_index[(1, 1)]
    assert p.layer_alpha[i] == pytest.approx(0.45)
    assert p.layer_emissive_gain[i] == pytest.approx(2.9)
    assert p.layer_texture_id[i] == 2
    j = p.layer_index[(0, 0)]
    assert (p.layer_alpha[j], p.layer_emissive_gain[j], p.layer_texture_id[j]) == (0.5, 0.25, 7)
    assert p.slot_texture_id.tolist() == [7, 8] and p.slot_kind.tolist() == [0, 1]
    assert a.pose(0, 600).slot_texture_id.tolist() == [7, 9]
    # a sequence where the flipbook has no key: KMTF falls back to the static texture id
    assert a.pose(1, 100).layer_texture_id[i] == 5
    assert a.pose(1, 100).layer_alpha[i] == 1.0  # KMTA with no key in the sequence: default 1


# ------------------------------------------------------------------------------ visibility


def test_attachment_and_light_visibility_step():
    m = base_model()
    m.attachments = [Attachment(name="Weapon", object_id=1, flags=0x800, tracks={
        "KATV": track("KATV", [0, 500], [1.0, 0.0], interpolation=1)}),
        Attachment(name="Head", object_id=0, flags=0x800)]
    m.lights = [Light(name="L", object_id=2, flags=0x200, tracks={"KLAV": track("KLAV", [0, 100], [0.0, 1.0])})]
    m.pivots = np.zeros((3, 3), "<f4")
    a = Animator(m)
    p = a.pose(0, 499)
    assert p.attachment_visibility.tolist() == [1.0, 1.0]
    assert a.pose(0, 500).attachment_visible.tolist() == [False, True]
    assert a.pose(0, 50).node_visible.tolist() == [True, True, False]


# ------------------------------------------------------------------------------ sequences


def test_sequence_lookup():
    m = base_model()
    assert find_sequence(m, "ATTACK") == 2
    assert find_sequence(m, " stand   1 ") == 1
    assert find_sequence(m, "Stand") == 1  # the lowest-numbered variation
    assert find_sequence(m, 0) == 0
    assert find_sequence(m, "2") == 2
    with pytest.raises(UnknownSequence) as info:
        find_sequence(m, "Walk")
    assert isinstance(info.value, ValueError)
    msg = str(info.value)
    assert "'Walk'" in msg and "'Stand 2'" in msg and "'Stand 1'" in msg and "'Attack'" in msg
    assert info.value.available == ["Stand 2", "Stand 1", "Attack"]
    with pytest.raises(UnknownSequence):
        find_sequence(m, 3)
    with pytest.raises(UnknownSequence):
        Animator(m).pose("Death", 0)


def test_no_sequence_is_the_bind_pose_with_static_values():
    m, _ = crate()
    p = Animator(m).pose(None, 500)
    np.testing.assert_allclose(p.node_matrices[0], np.eye(4))
    assert p.geoset_alpha.tolist() == [1.0, 1.0]


# ------------------------------------------------------------------------------ determinism


@pytest.mark.parametrize("version", [800, 1000, 1100])
def test_batch_equals_one_by_one_in_any_order(version):
    m = everything(version)
    times = [0, 17, 250, 499.5, 500, 999, 1000, 1800, 2500]
    batch = Animator(m).poses("Stand", times)
    rng = np.random.default_rng(0)
    single = {}
    for i in rng.permutation(len(times)):
        single[int(i)] = pose_at(m, 0, times[int(i)])
    for i, p in enumerate(batch):
        q = single[i]
        for name in ("node_matrices", "node_visibility", "geoset_alpha", "geoset_color", "layer_alpha",
                     "layer_emissive_gain", "layer_texture_id", "slot_texture_id", "uv_matrices",
                     "attachment_visibility"):
            np.testing.assert_array_equal(getattr(p, name), getattr(q, name), err_msg=name)
        for a, b in zip(p.palettes, q.palettes, strict=True):
            np.testing.assert_array_equal(a, b)
        assert np.all(np.isfinite(p.node_matrices))


def test_everything_model_poses_each_sequence():
    m = everything(1100)
    a = Animator(m)
    for si, s in enumerate(m.sequences):
        for t in (0, (s.interval[1] - s.interval[0]) / 2):
            p = a.pose(si, t)
            assert p.node_matrices.shape == (12, 4, 4)
            assert all(np.all(np.isfinite(pal)) for pal in p.palettes)
    spin = a.pose("Spin", 1000)  # frame 4000, between the keys 3666 (120°) and 4333 (240°)
    ang = math.radians(120 + 120 * (4000 - 3666) / (4333 - 3666))
    np.testing.assert_allclose(spin.node_matrices[0][:2, :2], [[math.cos(ang), -math.sin(ang)],
                                                               [math.sin(ang), math.cos(ang)]], atol=1e-6)
