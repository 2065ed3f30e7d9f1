"""Node world matrices: a two-bone arm, DontInherit flags, billboards, camera anchors, hierarchy repair."""

from __future__ import annotations

import math

import numpy as np
import pytest

from renderer.anim import Animator, look_at
from renderer.anim.skeleton import Skeleton
from renderer.anim.skinning import skin_vertices
from renderer.formats.mdx import read_mdx, write_mdx
from renderer.model import Bone, Geoset, Helper, Model, Sequence
from renderer.rules import (
    NODE_FLAG_DONT_INHERIT_ROTATION,
    NODE_FLAG_DONT_INHERIT_SCALING,
    NODE_FLAG_DONT_INHERIT_TRANSLATION,
)
from renderer.samples.build import track

BONE = 0x100


def q_z(deg):
    h = math.radians(deg) / 2
    return [0.0, 0.0, math.sin(h), math.cos(h)]


def point(m, p):
    return (np.asarray(m) @ np.append(np.asarray(p, float), 1.0))[:3]


def model_of(nodes, pivots, interval=(0, 1000)) -> Model:
    m = Model(version=800, name="Test")
    m.sequences = [Sequence(name="Stand", interval=interval)]
    m.helpers = list(nodes)
    m.pivots = np.asarray(pivots, "<f4").reshape(-1, 3)
    return m


def const_rot(deg):
    return {"KGRT": track("KGRT", [0], [q_z(deg)])}


# ------------------------------------------------------------------------------ two-bone arm


def arm_model() -> Model:
    """Shoulder at the origin, elbow at x = 10, hand at x = 20; a Hermite KGRT bends the elbow."""
    m = Model(version=800, name="Arm")
    m.sequences = [Sequence(name="Bend", interval=(0, 1000))]
    shoulder = Bone(name="Shoulder", object_id=0, flags=BONE)
    elbow = Bone(name="Elbow", object_id=1, parent_id=0, flags=BONE)
    # keys: identity at 0, 180° about Z at 1000; both tangents 90° about Z. At t = 0.5 the squad is
    # slerp(slerp(I, 180°, .5), slerp(90°, 90°, .5), .5) = slerp(90°, 90°, .5) = 90°.
    elbow.node_tracks["KGRT"] = track("KGRT", [0, 1000], [q_z(0), q_z(180)], interpolation=2,
                                      in_tans=[q_z(90), q_z(90)], out_tans=[q_z(90), q_z(90)])
    hand = Helper(name="Hand", object_id=2, parent_id=1)
    m.bones = [shoulder, elbow]
    m.helpers = [hand]
    m.pivots = np.array([[0, 0, 0], [10, 0, 0], [20, 0, 0]], "<f4")
    g = Geoset()
    g.vertices = np.array([[20, 0, 0], [5, 0, 0]], "<f4")
    g.normals = np.array([[1, 0, 0], [0, 0, 1]], "<f4")
    g.vertex_groups = np.array([1, 0], "u1")
    g.matrix_group_sizes = np.array([1, 1], "<u4")
    g.matrix_indices = np.array([0, 1], "<u4")
    m.geosets = [g]
    return read_mdx(write_mdx(m), "arm.mdx")  # through the project's own MDX writer


def test_two_bone_arm_bent_90_degrees_by_hermite_track():
    m = arm_model()
    pose = Animator(m).pose("bend", 500)
    hand = point(pose.node_matrices[2], [20, 0, 0])
    np.testing.assert_allclose(hand, [10, 10, 0], atol=1e-6)
    np.testing.assert_allclose(point(pose.node_matrices[1], [20, 0, 0]), [10, 10, 0], atol=1e-6)
    np.testing.assert_allclose(point(pose.node_matrices[0], [20, 0, 0]), [20, 0, 0], atol=1e-6)
    # skinned: the hand vertex follows the elbow, the upper-arm vertex stays
    pos, nrm = skin_vertices(m, 0, pose.node_matrices)
    np.testing.assert_allclose(pos, [[10, 10, 0], [5, 0, 0]], atol=1e-6)
    np.testing.assert_allclose(nrm, [[0, 1, 0], [0, 0, 1]], atol=1e-6)


def test_two_bone_arm_at_a_quarter():
    # t = .25: slerp(slerp(I, 180°, .25), 90°, 2 * .25 * .75) = slerp(45°, 90°, .375) = 61.875°
    pose = Animator(arm_model()).pose(0, 250)
    a = math.radians(61.875)
    np.testing.assert_allclose(point(pose.node_matrices[2], [20, 0, 0]),
                               [10 + 10 * math.cos(a), 10 * math.sin(a), 0], atol=1e-6)
    np.testing.assert_allclose(point(Animator(arm_model()).pose(0, 0).node_matrices[2], [20, 0, 0]), [20, 0, 0])


# ------------------------------------------------------------------------------ DontInherit


def parent_and_children(parent_tracks, child_flags):
    """Node 0 (pivot origin) with tracks; node 1 a plain child and node 2 a flagged child, both at x=10."""
    nodes = [Helper(name="P", object_id=0, node_tracks=parent_tracks),
             Helper(name="plain", object_id=1, parent_id=0),
             Helper(name="flagged", object_id=2, parent_id=0, flags=child_flags)]
    return Animator(model_of(nodes, [[0, 0, 0], [10, 0, 0], [10, 0, 0]])).pose(0, 100).node_matrices


def test_dont_inherit_rotation_child():
    w = parent_and_children(const_rot(90), NODE_FLAG_DONT_INHERIT_ROTATION)
    np.testing.assert_allclose(point(w[1], [11, 0, 0]), [0, 11, 0], atol=1e-6)
    # pivot carried by the parent to (0, 10, 0), the offset keeps the model-space direction
    np.testing.assert_allclose(point(w[2], [11, 0, 0]), [1, 10, 0], atol=1e-6)
    np.testing.assert_allclose(w[2][:3, :3], np.eye(3), atol=1e-6)


def test_dont_inherit_rotation_grandchild_inherits_from_the_flagged_node():
    nodes = [Helper(name="P", object_id=0, node_tracks=const_rot(90)),
             Helper(name="C", object_id=1, parent_id=0, flags=NODE_FLAG_DONT_INHERIT_ROTATION),
             Helper(name="G", object_id=2, parent_id=1, node_tracks=const_rot(90))]
    w = Animator(model_of(nodes, [[0, 0, 0], [10, 0, 0], [20, 0, 0]])).pose(0, 0).node_matrices
    # G rotates 90° about its own pivot, which C carried to (10, 10, 0)
    np.testing.assert_allclose(point(w[2], [21, 0, 0]), [10, 11, 0], atol=1e-6)


def test_dont_inherit_translation_child():
    moved = {"KGTR": track("KGTR", [0], [[0, 0, 5]])}
    w = parent_and_children(moved, NODE_FLAG_DONT_INHERIT_TRANSLATION)
    np.testing.assert_allclose(point(w[1], [11, 0, 0]), [11, 0, 5], atol=1e-6)
    np.testing.assert_allclose(point(w[2], [11, 0, 0]), [11, 0, 0], atol=1e-6)
    # with a rotating parent the pivot stays at rest but the parent's rotation still applies
    w = parent_and_children(const_rot(90), NODE_FLAG_DONT_INHERIT_TRANSLATION)
    np.testing.assert_allclose(point(w[2], [11, 0, 0]), [10, 1, 0], atol=1e-6)


def test_dont_inherit_scaling_child():
    scaled = {"KGSC": track("KGSC", [0], [[2, 2, 2]])}
    w = parent_and_children(scaled, NODE_FLAG_DONT_INHERIT_SCALING)
    np.testing.assert_allclose(point(w[1], [11, 0, 0]), [22, 0, 0], atol=1e-6)
    np.testing.assert_allclose(point(w[2], [11, 0, 0]), [21, 0, 0], atol=1e-6)


def test_flagged_code_path_without_flags_equals_the_matrix_product():
    # Every node forced through the decomposed (flag) path with no flag bit set must give exactly
    # parentWorld @ local, also with non-uniform scales in the chain.
    rng = np.random.default_rng(3)
    n = 40
    parents = [-1] + [int(rng.integers(-1, i)) for i in range(1, n)]
    t = rng.normal(size=(n, 3))
    r = rng.normal(size=(n, 4))
    s = rng.uniform(0.3, 3, size=(n, 3))
    nodes = [Helper(name=f"n{i}", object_id=i, parent_id=parents[i]) for i in range(n)]
    sk = Skeleton(model_of(nodes, rng.normal(size=(n, 3)) * 5))
    plain = sk.world_matrices(t, r, s)
    sk.special[:] = True
    sk.track_rotation = True
    sk.levels = [(p[:0], pp[:0], np.concatenate([p, f]), np.concatenate([pp, fp])) for p, pp, f, fp in sk.levels]
    sk.rotation_levels = [(p[:0], pp[:0]) for p, pp, _, _ in sk.levels]
    forced = sk.world_matrices(t, r, s)
    np.testing.assert_allclose(forced, plain, atol=1e-9)


# ------------------------------------------------------------------------------ billboards


EYE_Y = look_at([0, 100, 0], [0, 0, 0])  # camera on +Y looking at the origin, Z up


def billboard_model(flags, parent_deg=0.0, pivot=(0, 0, 0)):
    nodes = [Helper(name="P", object_id=0, node_tracks=const_rot(parent_deg)),
             Helper(name="B", object_id=1, parent_id=0, flags=flags)]
    return model_of(nodes, [[0, 0, 0], pivot])


def test_billboarded_node_faces_the_camera():
    for parent_deg in (0.0, 90.0, 33.0):
        w = Animator(billboard_model(0x8, parent_deg)).pose(0, 0, EYE_Y).node_matrices[1]
        # +X toward the viewer, +Y screen right (-X world here), +Z screen up
        np.testing.assert_allclose(w[:3, :3], [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-9)


def test_billboarded_quad_faces_a_general_camera():
    eye = np.array([80.0, -30.0, 55.0])
    view = look_at(eye, [0, 0, 10])
    m = billboard_model(0x8, 45.0, pivot=(5, 0, 10))
    g = Geoset()
    g.vertices = np.array([[5, -1, 9], [5, 1, 9], [5, 1, 11], [5, -1, 11]], "<f4")  # quad in the YZ plane
    g.normals = np.tile(np.array([1, 0, 0], "<f4"), (4, 1))
    g.vertex_groups = np.zeros(4, "u1")
    g.matrix_group_sizes = np.array([1], "<u4")
    g.matrix_indices = np.array([1], "<u4")
    m.geosets = [g]
    pose = Animator(m).pose(0, 0, view)
    pos, nrm = skin_vertices(m, 0, pose.node_matrices)
    back = view[2, :3]  # the direction toward the viewer
    np.testing.assert_allclose(nrm, np.tile(back, (4, 1)), atol=1e-9)
    # the pivot is carried by the parent (rotation 45° about Z moves (5, 0, 10))
    centre = pos.mean(axis=0)
    a = math.radians(45)
    np.testing.assert_allclose(centre, [5 * math.cos(a), 5 * math.sin(a), 10], atol=1e-9)
    # the quad's +Z edge is screen up, its +Y edge screen right
    np.testing.assert_allclose((pos[2] - pos[1]) / 2, view[1, :3], atol=1e-9)
    np.testing.assert_allclose((pos[1] - pos[0]) / 2, view[0, :3], atol=1e-9)


def test_lock_z_turns_x_toward_the_camera_about_z():
    w = Animator(billboard_model(0x40)).pose(0, 0, EYE_Y).node_matrices[1]
    np.testing.assert_allclose(w[:3, 0], [0, 1, 0], atol=1e-9)  # +X now faces +Y (the camera)
    np.testing.assert_allclose(w[:3, 2], [0, 0, 1], atol=1e-9)  # Z stays
    # under a parent already turned 90° about Z, nothing is left to turn
    w = Animator(billboard_model(0x40, 90.0)).pose(0, 0, EYE_Y).node_matrices[1]
    np.testing.assert_allclose(w[:3, 0], [0, 1, 0], atol=1e-9)
    w = Animator(billboard_model(0x40)).pose(0, 0, look_at([100, 0, 50], [0, 0, 0])).node_matrices[1]
    np.testing.assert_allclose(w[:3, :3], np.eye(3), atol=1e-9)


def test_lock_y_turns_x_toward_the_camera_about_y():
    view = look_at([100, 0, 100], [0, 0, 0])
    w = Animator(billboard_model(0x20)).pose(0, 0, view).node_matrices[1]
    s = math.sqrt(0.5)
    np.testing.assert_allclose(w[:3, 0], [s, 0, s], atol=1e-9)
    np.testing.assert_allclose(w[:3, 1], [0, 1, 0], atol=1e-9)


def test_lock_x_turns_y_toward_the_camera_and_mirrors_z():
    view = look_at([0, 100, 100], [0, 0, 0])
    w = Animator(billboard_model(0x10)).pose(0, 0, view).node_matrices[1]
    s = math.sqrt(0.5)
    np.testing.assert_allclose(w[:3, 0], [1, 0, 0], atol=1e-9)
    np.testing.assert_allclose(w[:3, 1], [0, s, s], atol=1e-9)
    np.testing.assert_allclose(w[:3, 2], [0, s, -s], atol=1e-9)  # rotated Z (0, -s, s), negated


def test_camera_anchored_node_sits_at_the_eye():
    w = Animator(billboard_model(0x80, pivot=(3, 4, 5))).pose(0, 0, EYE_Y).node_matrices[1]
    np.testing.assert_allclose(point(w, [3, 4, 5]), [0, 100, 0], atol=1e-9)


def test_default_view_is_used_without_a_camera():
    w = Animator(billboard_model(0x8)).pose(0, 0).node_matrices[1]
    az, el = math.radians(30), math.radians(20)
    np.testing.assert_allclose(w[:3, 0], [math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)],
                               atol=1e-9)


# ------------------------------------------------------------------------------ hierarchy


def test_cycles_missing_and_self_parents_become_roots_with_notes():
    nodes = [Helper(name="a", object_id=0, parent_id=1, node_tracks=const_rot(90)),
             Helper(name="b", object_id=1, parent_id=0),
             Helper(name="c", object_id=2, parent_id=2),
             Helper(name="d", object_id=3, parent_id=42),
             Helper(name="e", object_id=5, parent_id=3)]
    m = model_of(nodes, np.zeros((6, 3)))
    sk = Skeleton(m)
    # One row per node (object ids 0, 1, 2, 3, 5); the unused id 4 has no row; 5 = the root.
    assert sk.ids.tolist() == [0, 1, 2, 3, 5]
    assert sk.parents.tolist() == [5, 0, 5, 5, 3]
    joined = " ".join(sk.notes)
    assert "cycle" in joined and "own parent" in joined and "missing parent 42" in joined
    w = Animator(m).pose(0, 0).node_matrices
    assert w.shape == (5, 4, 4) and np.all(np.isfinite(w))
    np.testing.assert_allclose(w[1], w[0], atol=1e-12)  # b inherits a's rotation


def test_random_hierarchy_matches_recursive_reference():
    rng = np.random.default_rng(7)
    n = 60
    nodes, pivots = [], rng.normal(size=(n, 3)) * 10
    for i in range(n):
        parent = int(rng.integers(-1, i)) if i else -1
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        tracks = {"KGTR": track("KGTR", [0, 1000], rng.normal(size=(2, 3))),
                  "KGRT": track("KGRT", [0], [q]),
                  "KGSC": track("KGSC", [0], [rng.uniform(0.5, 2, size=3)])}
        nodes.append(Helper(name=f"n{i}", object_id=i, parent_id=parent, node_tracks=tracks))
    order = rng.permutation(n)
    m = model_of([nodes[i] for i in order], pivots)
    w = Animator(m).pose(0, 300).node_matrices

    def rot(q):
        x, y, z, s = q / np.linalg.norm(q)  # stored as float32: normalised, as the skeleton does
        return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - s * z), 2 * (x * z + s * y)],
                         [2 * (x * y + s * z), 1 - 2 * (x * x + z * z), 2 * (y * z - s * x)],
                         [2 * (x * z - s * y), 2 * (y * z + s * x), 1 - 2 * (x * x + y * y)]])

    def world(i):
        nd = nodes[i]
        k = nd.node_tracks
        t = k["KGTR"].values[0] + 0.3 * (k["KGTR"].values[1] - k["KGTR"].values[0])
        mat = np.eye(4)
        lin = rot(k["KGRT"].values[0].astype(float)) @ np.diag(k["KGSC"].values[0].astype(float))
        c = m.pivots[i].astype(float)
        mat[:3, :3] = lin
        mat[:3, 3] = c + t - lin @ c
        return mat if nd.parent_id < 0 else world(nd.parent_id) @ mat

    for i in range(n):
        np.testing.assert_allclose(w[i], world(i), atol=1e-9, rtol=1e-6)


def test_duplicate_object_ids_keep_the_first():
    nodes = [Helper(name="first", object_id=0, node_tracks=const_rot(90)), Helper(name="second", object_id=0)]
    sk = Skeleton(model_of(nodes, [[0, 0, 0]]))
    assert sk.count == 1 and sk.nodes[0].name == "first"
    assert any("second" in n for n in sk.notes)


def test_bad_view_is_rejected():
    with pytest.raises(ValueError):
        Animator(billboard_model(0x8)).pose(0, 0, np.full((4, 4), np.nan))
    flat = np.eye(4)
    flat[1, :3] = flat[0, :3]
    with pytest.raises(ValueError):
        Animator(billboard_model(0x8)).pose(0, 0, flat)


# ------------------------------------------------------------------------------ exactness


@pytest.mark.parametrize("flag_sets", ["mixed", "uniform"])
def test_flagged_nodes_equal_the_reference_bit_for_bit(flag_sets):
    # The flag path skips the np.where branches a uniform mask discards and caches masks and the
    # camera frame; the world matrices keep exactly the bits of the code before (anim_reference).
    from anim_reference import ReferenceSkeleton, same_bits

    from renderer.anim.skeleton import SPECIAL_FLAGS

    bits = [b for b in range(8) if SPECIAL_FLAGS >> b & 1]
    rng = np.random.default_rng(7 if flag_sets == "mixed" else 8)
    for trial in range(12):
        n = 30
        parents = [-1] + [int(rng.integers(-1, i)) for i in range(1, n)]
        if flag_sets == "mixed":
            flags = [sum(1 << b for b in bits if rng.random() < 0.2) for _ in range(n)]
        else:  # every flagged node has the same flags: the uniform-mask branches
            one = sum(1 << b for b in bits if rng.random() < 0.3) or 1 << bits[trial % len(bits)]
            flags = [one if rng.random() < 0.4 else 0 for _ in range(n)]
        nodes = [Helper(name=f"n{i}", object_id=i, parent_id=parents[i], flags=flags[i]) for i in range(n)]
        model = model_of(nodes, rng.normal(size=(n, 3)) * 5)
        sk, ref = Skeleton(model), ReferenceSkeleton(model)
        for view in (None, look_at([300, 200, 150], [0, 0, 60]), None, look_at([0, -80, 10], [1, 2, 3])):
            t = rng.normal(size=(n, 3))
            r = rng.normal(size=(n, 4))
            s = rng.uniform(-2, 3, size=(n, 3))
            assert same_bits(sk.world_matrices(t, r, s, view=view), ref.world_matrices(t, r, s, view=view))
