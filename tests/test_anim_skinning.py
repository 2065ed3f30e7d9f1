"""Skinning palettes (matrix groups of any size, SKIN, float weights) against hand numbers and the
separate CPU reference."""

from __future__ import annotations

import numpy as np

from renderer.anim.skinning import PaletteBuilder, geoset_skin, skin_vertices, skin_with_palette
from renderer.model import Geoset, Model


def translate(x, y, z):
    m = np.eye(4)
    m[:3, 3] = (x, y, z)
    return m


def rot_z(deg, about=(0, 0, 0)):
    a = np.radians(deg)
    m = np.eye(4)
    m[:2, :2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
    c = np.asarray(about, float)
    m[:3, 3] = c - m[:3, :3] @ c
    return m


def random_affine(rng):
    m = np.eye(4)
    m[:3, :3] = rng.normal(size=(3, 3))
    m[:3, 3] = rng.normal(size=3) * 10
    return m


def geoset(vertices, normals=None, **kw) -> Geoset:
    g = Geoset()
    g.vertices = np.asarray(vertices, "<f4").reshape(-1, 3)
    g.normals = (np.tile(np.array([0, 0, 1], "<f4"), (len(g.vertices), 1)) if normals is None
                 else np.asarray(normals, "<f4").reshape(-1, 3))
    for k, v in kw.items():
        setattr(g, k, v)
    return g


def palette_path(model, gi, nodes):
    skins = [geoset_skin(g, len(nodes)) for g in model.geosets]
    pal = PaletteBuilder(skins, len(nodes)).build(nodes)
    g = model.geosets[gi]
    return skin_with_palette(pal[gi], skins[gi], g.vertices, g.normals)


def test_five_bone_group_is_the_equal_weight_average():
    nodes = np.stack([translate(i, 0, 0) for i in range(5)] + [rot_z(90)])
    g = geoset([[1, 2, 3], [1, 0, 0]], vertex_groups=np.array([0, 1], "u1"),
               matrix_group_sizes=np.array([5, 1], "<u4"), matrix_indices=np.array([0, 1, 2, 3, 4, 5], "<u4"))
    m = Model(geosets=[g])
    pos, nrm = skin_vertices(m, 0, nodes)
    np.testing.assert_allclose(pos, [[3, 2, 3], [0, 1, 0]], atol=1e-12)  # mean translation (2, 0, 0)
    got_pos, got_nrm = palette_path(m, 0, nodes)
    np.testing.assert_allclose(got_pos, pos, atol=1e-12)
    np.testing.assert_allclose(got_nrm, nrm, atol=1e-12)
    skins = [geoset_skin(g, 6)]
    pal = PaletteBuilder(skins, 6).build(nodes)[0]
    assert pal.shape == (3, 4, 4)  # two groups + the identity row
    np.testing.assert_allclose(pal[0], translate(2, 0, 0))


def test_groups_of_every_size_match_the_reference():
    rng = np.random.default_rng(1)
    nodes = np.stack([random_affine(rng) for _ in range(12)])
    sizes = np.array([1, 2, 3, 4, 5, 7, 8], "<u4")
    mats = rng.integers(0, 12, size=int(sizes.sum())).astype("<u4")
    n = 200
    g = geoset(rng.normal(size=(n, 3)) * 20, rng.normal(size=(n, 3)),
               vertex_groups=rng.integers(0, len(sizes), size=n).astype("u1"),
               matrix_group_sizes=sizes, matrix_indices=mats)
    other = geoset([[0, 0, 0]], vertex_groups=np.array([0], "u1"), matrix_group_sizes=np.array([2], "<u4"),
                   matrix_indices=np.array([3, 9], "<u4"))
    m = Model(geosets=[other, g])
    for gi in (0, 1):
        ref = skin_vertices(m, gi, nodes)
        got = palette_path(m, gi, nodes)
        np.testing.assert_allclose(got[0], ref[0], atol=1e-9)
        np.testing.assert_allclose(got[1], ref[1], atol=1e-9)


def test_unattached_vertices_and_bad_bone_ids_use_the_identity():
    nodes = np.stack([translate(5, 0, 0), translate(0, 5, 0)])
    g = geoset([[1, 1, 1], [2, 2, 2], [3, 3, 3]], vertex_groups=np.array([0, 255, 1], "u1"),
               matrix_group_sizes=np.array([1, 2, 0], "<u4"), matrix_indices=np.array([0, 1, 99], "<u4"))
    m = Model(geosets=[g])
    skin = geoset_skin(g, 2)
    assert any("name no matrix group" in n for n in skin.notes)
    assert any("name no node" in n for n in skin.notes)
    ref = skin_vertices(m, 0, nodes)[0]
    # vertex 1: no group -> bind pose; vertex 2: group {1, 99}: mean of (0, 5, 0) and the identity
    np.testing.assert_allclose(ref, [[6, 1, 1], [2, 2, 2], [3, 5.5, 3]])
    np.testing.assert_allclose(palette_path(m, 0, nodes)[0], ref)


def test_skin_weights_index_node_object_ids():
    # Bone indices are node object ids, not positions in the geoset's MATS list (here MATS = [3]).
    nodes = np.stack([np.eye(4), translate(10, 0, 0), translate(0, 20, 0), translate(0, 0, 99)])
    skin = np.array([[1, 2, 0, 0, 64, 191, 0, 0],
                     [2, 0, 0, 0, 255, 0, 0, 0],
                     [3, 1, 0, 0, 0, 0, 0, 0]], "u1")  # weights sum to 0: bind pose
    g = geoset([[1, 1, 1]] * 3, skin=skin, vertex_groups=np.zeros(3, "u1"),
               matrix_group_sizes=np.array([1], "<u4"), matrix_indices=np.array([3], "<u4"))
    m = Model(geosets=[g])
    pos, _ = skin_vertices(m, 0, nodes)
    np.testing.assert_allclose(pos, [[1 + 10 * 64 / 255, 1 + 20 * 191 / 255, 1], [1, 21, 1], [1, 1, 1]], atol=1e-12)
    got, _ = palette_path(m, 0, nodes)
    np.testing.assert_allclose(got, pos, atol=1e-5)  # weights are float32 on the GPU path
    s = geoset_skin(g, 4)
    assert s.kind == "skin" and s.palette_size == 5
    assert s.bone_indices[2].tolist() == [4, 0, 0, 0] and s.bone_weights[2].tolist() == [1, 0, 0, 0]


def test_skin_with_rotation_blends_normals_and_renormalises():
    nodes = np.stack([rot_z(90), np.eye(4)])
    skin = np.array([[0, 1, 0, 0, 128, 127, 0, 0]], "u1")
    g = geoset([[1, 0, 0]], [[1, 0, 0]], skin=skin)
    m = Model(geosets=[g])
    pos, nrm = skin_vertices(m, 0, nodes)
    a, b = 128 / 255, 127 / 255
    np.testing.assert_allclose(pos, [[b, a, 0]], atol=1e-12)
    np.testing.assert_allclose(nrm, [np.array([b, a, 0]) / np.hypot(a, b)], atol=1e-12)
    got_pos, got_nrm = palette_path(m, 0, nodes)
    np.testing.assert_allclose(got_pos, pos, atol=1e-6)
    np.testing.assert_allclose(got_nrm, nrm, atol=1e-6)


def test_float_weights_and_out_of_range_indices():
    rng = np.random.default_rng(5)
    nodes = np.stack([random_affine(rng) for _ in range(6)])
    n = 50
    idx = rng.integers(0, 8, size=(n, 4)).astype(np.int32)  # 6 and 7 name no node
    w = rng.uniform(0, 1, size=(n, 4)).astype(np.float32)
    w[:5] = 0
    g = geoset(rng.normal(size=(n, 3)), rng.normal(size=(n, 3)), bone_indices=idx, bone_weights=w)
    m = Model(geosets=[g])
    ref = skin_vertices(m, 0, nodes)
    got = palette_path(m, 0, nodes)
    np.testing.assert_allclose(got[0], ref[0], atol=1e-9)
    np.testing.assert_allclose(got[1], ref[1], atol=1e-9)
    np.testing.assert_allclose(ref[0][:5], g.vertices[:5], atol=1e-6)
    assert geoset_skin(g, 6).kind == "weights"


def test_empty_geoset():
    g = geoset(np.zeros((0, 3)))
    skins = [geoset_skin(g, 3)]
    pal = PaletteBuilder(skins, 3).build(np.stack([np.eye(4)] * 3))
    assert pal[0].shape == (1, 4, 4)
    pos, nrm = skin_vertices(Model(geosets=[g]), 0, np.stack([np.eye(4)] * 3))
    assert pos.shape == (0, 3) and nrm.shape == (0, 3)


def test_palettes_equal_the_reduceat_form_bit_for_bit():
    # Group sizes 0..12 (9 and more take the reduceat fallback), ids naming no node, several group
    # geosets beside weighted ones, matrices of very different magnitudes and signed zeros: every
    # palette has exactly the bits of the old single np.add.reduceat.
    from anim_reference import reference_palettes, same_bits

    rng = np.random.default_rng(18)
    n = 30
    geosets = []
    for gi in range(6):
        sizes = rng.integers(0, 13, size=int(rng.integers(1, 40))).astype("<u4")
        mats = rng.integers(0, n + 3, size=int(sizes.sum())).astype("<u4")  # n.. name no node
        geosets.append(geoset([[0, 0, 0]] * 3, vertex_groups=np.array([0, 1, 250], "u1"),
                              matrix_group_sizes=sizes, matrix_indices=mats))
        if gi % 2:
            geosets.append(geoset([[1, 2, 3]], bone_indices=np.array([[0, 1, 2, 3]], "u1"),
                                  bone_weights=np.array([[0.5, 0.5, 0, 0]], "<f4")))
    skins = [geoset_skin(g, n) for g in geosets]
    builder = PaletteBuilder(skins, n)
    for _ in range(5):
        nodes = rng.normal(size=(n, 4, 4)) * 10.0 ** rng.uniform(-6, 6, size=(n, 1, 1))
        nodes[rng.random((n, 4, 4)) < 0.1] = -0.0
        nodes[rng.random((n, 4, 4)) < 0.1] = 0.0
        got = builder.build(nodes)
        want = reference_palettes(skins, n, nodes)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert same_bits(g, w)


def test_each_build_returns_new_palettes():
    rng = np.random.default_rng(2)
    g = geoset([[0, 0, 0]], vertex_groups=np.array([0], "u1"), matrix_group_sizes=np.array([0, 1, 2, 3], "<u4"),
               matrix_indices=np.array([0, 1, 2, 0, 1, 2], "<u4"))
    w = geoset([[0, 0, 0]], bone_indices=np.array([[0, 1, 2, 3]], "u1"), bone_weights=np.array([[1, 0, 0, 0]], "<f4"))
    builder = PaletteBuilder([geoset_skin(g, 3), geoset_skin(w, 3)], 3)
    first = builder.build(rng.normal(size=(3, 4, 4)))
    kept = [p.copy() for p in first]
    builder.build(rng.normal(size=(3, 4, 4)))
    for p, k in zip(first, kept, strict=True):
        np.testing.assert_array_equal(p, k)
    np.testing.assert_array_equal(first[0][0], np.eye(4))  # the empty group
    np.testing.assert_array_equal(first[0][-1], np.eye(4))
    np.testing.assert_array_equal(first[1][-1], np.eye(4))
