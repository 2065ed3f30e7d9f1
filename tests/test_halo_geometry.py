"""Halo geometry maths on hand-made cases: strips, compressed vertices, node transforms, skinning data."""

from __future__ import annotations

import numpy as np
import pytest
from test_halo_tagbuild import compressed_from, model_tag, uncompressed

from renderer.formats.halo import geometry as G
from renderer.formats.halo import read_halo_model


def tris(strip):
    t, skipped = G.strip_to_triangles(np.array(strip, np.uint16))
    return [tuple(int(x) for x in row) for row in t], skipped


# -- strips -> triangles -------------------------------------------------------------------------

def test_single_triangle_is_reversed_from_the_raw_strip():
    assert tris([0, 1, 2]) == ([(0, 2, 1)], 0)


def test_strip_parity_alternates():
    # k=0: (0,2,1); k=1: (1,2,3); k=2: (2,4,3); k=3: (3,4,5)
    assert tris([0, 1, 2, 3, 4, 5])[0] == [(0, 2, 1), (1, 2, 3), (2, 4, 3), (3, 4, 5)]


def test_trailing_padding_is_dropped():
    assert tris([0, 1, 2, 3, 0xFFFF, 0xFFFF]) == ([(0, 2, 1), (1, 2, 3)], 0)
    assert tris([0, 1, 0xFFFF]) == ([], 0)
    assert tris([]) == ([], 0)
    assert tris([0xFFFF, 0xFFFF, 0xFFFF]) == ([], 0)


def test_degenerates_are_skipped_without_resetting_parity():
    # Two strips joined by repeating indices: A B C C D D E F G (k=3 is D D E -> degenerate...)
    strip = [0, 1, 2, 2, 3, 3, 4, 5, 6]
    got, skipped = tris(strip)
    # k: 0 (0,2,1) | 1 (1,2,2)x | 2 (2,3,2)x | 3 (2,3,3)x | 4 (3,4,3)x | 5 (3,4,5) | 6 (4,6,5)
    assert got == [(0, 2, 1), (3, 4, 5), (4, 6, 5)]
    assert skipped == 4


def test_mid_strip_none_index_is_skipped():
    got, skipped = tris([0, 1, 2, 0xFFFF, 3, 4, 5])
    assert got == [(0, 2, 1), (3, 5, 4)]
    assert skipped == 3


def test_winding_is_counter_clockwise_for_an_upward_quad():
    # Quad in the XY plane facing +Z, as the HEK strips it: the raw strip (0,1,2), (1,3,2)... is clockwise
    # seen from +Z (a D3D-style strip); the loader's triangles must be counter-clockwise.
    p = np.array([(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)], np.float32)
    raw = np.cross(p[1] - p[0], p[2] - p[0])
    assert raw[2] < 0
    t, _ = G.strip_to_triangles(np.array([0, 1, 2, 3], np.uint16))
    assert len(t) == 2
    for a, b, c in t:
        n = np.cross(p[b] - p[a], p[c] - p[a])
        assert n[2] > 0


# -- compressed vertices -----------------------------------------------------------------------------

def test_fixed_point_endpoints():
    assert G.unit_fixed(np.array([0x3FF]), 11)[0] == 1.0
    assert G.unit_fixed(np.array([0x400]), 11)[0] == -1.0
    assert G.unit_fixed(np.array([0]), 11)[0] == 0.0
    assert G.unit_fixed(np.array([0x1FF]), 10)[0] == 1.0
    assert G.unit_fixed(np.array([0x200]), 10)[0] == -1.0
    # 0x7FF is ones'-complement minus zero.
    assert G.unit_fixed(np.array([0x7FF]), 11)[0] == 0.0


def test_vector_packing_round_trips_within_one_step():
    rng = np.random.default_rng(1)
    v = rng.uniform(-1, 1, (500, 3))
    d = G.decompress_vector(G.compress_vector(v))
    assert np.abs(d - v).max() <= 1 / 511 + 1e-6
    assert G.decompress_vector(np.array([0x3FF | (0x3FF << 11) | (0x1FF << 22)], np.uint32)).tolist() == [[1, 1, 1]]


def test_compressed_nodes_uvs_and_weights():
    u = uncompressed([(1, 2, 3), (4, 5, 6)], uvs=[(0.5, -0.25), (1, 0)], nodes=[(2, -1), (0, 5)],
                     weights=[(1, 0), (0.25, 0.75)])
    d = G.decode_compressed(compressed_from(u))
    assert d["nodes"].tolist() == [[2, -1], [0, 5]]
    assert np.allclose(d["uv"], [(0.5, -0.25), (1, 0)], atol=1 / 32767)
    assert np.allclose(d["weights"], [(1, 0), (0.25, 0.75)], atol=1 / 32767)
    assert np.allclose(d["position"], [(1, 2, 3), (4, 5, 6)])


# -- nodes -----------------------------------------------------------------------------------------

def test_quaternion_is_the_conjugate_convention():
    # q = (0, 0, sin 45, cos 45): the textbook matrix turns +X to +Y; Halo's stored q means the inverse.
    s = np.sqrt(0.5)
    m = G.quaternion_matrix(np.array([[0, 0, s, s]]))[0]
    assert np.allclose(m @ [1, 0, 0], [0, -1, 0])
    assert np.allclose(m @ m.T, np.eye(3))


def test_world_matrices_compose_parent_first_in_any_order():
    s = np.sqrt(0.5)
    t = np.array([(0, 0, 1), (1, 0, 0), (2, 0, 0)], float)
    q = np.array([(0, 0, s, s), (0, 0, 0, 1), (0, 0, 0, 1)], float)
    parents = [-1, 2, 0]  # node 1's parent comes after it
    w, problems = G.world_matrices(G.local_matrices(t, q), parents)
    assert not problems
    # node 2 = root rotation applied to (2, 0, 0) + (0, 0, 1) = (0, -2, 1); node 1 adds R·(1,0,0)=(0,-1,0)
    assert np.allclose(w[2][:3, 3], (0, -2, 1))
    assert np.allclose(w[1][:3, 3], (0, -3, 1))


def test_bad_parents_become_roots():
    local = G.local_matrices(np.zeros((3, 3)), np.tile([0, 0, 0, 1.0], (3, 1)))
    parents = [1, 0, 7]
    _, problems = G.world_matrices(local, parents)
    assert len(problems) == 2 and parents[2] == -1 and -1 in parents[:2]


# -- the loader's skin arrays -------------------------------------------------------------------------

def test_skin_arrays_local_nodes_and_normalised_weights():
    nodes = [("root", -1, (0, 0, 0), (0, 0, 0, 1))] + [(f"n{i}", 0, (i, 0, 0), (0, 0, 0, 1)) for i in range(1, 6)]
    u = uncompressed([(0, 0, 0), (1, 0, 0), (0, 1, 0)], nodes=[(0, -1), (1, 2), (2, 0)],
                     weights=[(1, 0), (0.5, 0.25), (0, 0)])
    part = {"shader": 0, "uncompressed": u, "strip": [0, 1, 2], "local_nodes": [5, 3, 4], "flags": 2}
    data = model_tag(nodes=nodes, geometries=[[part]], flags=2)
    m = read_halo_model(data, "local.gbxmodel")
    gs = m.geosets[0]
    assert gs.bone_indices.dtype == np.int32 and gs.bone_indices.shape == (3, 4)
    assert gs.bone_indices[:, :2].tolist() == [[5, 0], [3, 4], [4, 5]]
    assert np.allclose(gs.bone_weights[:, :2], [(1, 0), (2 / 3, 1 / 3), (1, 0)])
    assert np.allclose(gs.bone_weights.sum(axis=1), 1)
    assert m.info["geometries"][0]["parts"][0]["local_nodes"] == [5, 3, 4]


def test_uv_scale_and_flat_texture_without_tag_root():
    u = uncompressed([(0, 0, 0), (1, 0, 0), (0, 1, 0)], uvs=[(0, 0), (1, 0.5), (0.5, 1)])
    data = model_tag(geometries=[[{"shader": 0, "uncompressed": u, "strip": [0, 1, 2]}]], base_map_scale=(2.0, 0.0))
    m = read_halo_model(data, "uv.gbxmodel")
    assert np.allclose(m.geosets[0].uv_sets[0], [(0, 0), (2, 0.5), (1, 1)])
    assert m.textures[0].path == "" and m.info["textures"][0]["flat_color"][3] == 255
    assert any("no tag root" in d.message for d in m.diagnostics)


def test_compressed_only_parts_decode():
    u = uncompressed([(0, 0, 0), (1, 0, 0), (0, 1, 0)], normals=[(0, 0, 1)] * 3, uvs=[(0, 0), (1, 0), (0, 1)])
    data = model_tag(cls=b"mode", geometries=[[{"shader": 0, "compressed": compressed_from(u), "strip": [0, 1, 2]}]])
    m = read_halo_model(data, "xbox.model")
    gs = m.geosets[0]
    assert np.allclose(gs.vertices, u["position"])
    assert np.allclose(gs.normals, [(0, 0, 1)] * 3, atol=2e-3)
    assert gs.bone_indices[:, :2].tolist() == [[0, 0]] * 3
    assert np.allclose(gs.bone_weights[:, 0], 1)


@pytest.mark.parametrize("lod", ["super_high", "high", "medium", "low", "super_low", 0, 4, "Super High"])
def test_lod_names(lod):
    from renderer.formats.halo import lod_index

    assert 0 <= lod_index(lod) <= 4


def test_bad_lod_name():
    from renderer.formats.halo import lod_index

    with pytest.raises(ValueError):
        lod_index("ultra")
    with pytest.raises(ValueError):
        lod_index(5)
