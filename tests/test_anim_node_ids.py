"""Object ids never size anything: ids near 2^32 pose and render like ids 0..N-1 (issue 14)."""

from __future__ import annotations

import numpy as np
import pytest

from renderer.anim import Animator
from renderer.anim.skeleton import Skeleton
from renderer.anim.skinning import skin_vertices
from renderer.formats.mdl.read import read_mdl
from renderer.formats.mdl.write import write_mdl
from renderer.formats.mdx import read_mdx, write_mdx
from renderer.model import Bone, Helper
from renderer.samples.build import crate, track

# object id in the plain model -> object id in the hostile one (parents follow as i32 bit patterns)
HUGE = {0: 2**32 - 2, 1: 2**31, 2: 7, 3: 2**32 - 3}


def _i32(oid: int) -> int:
    return oid - 2**32 if oid >= 2**31 else oid


def chain_model(ids=None):
    """The crate with a chain of animated nodes, its geosets skinned to several of them."""
    ids = ids or {i: i for i in range(4)}
    m, _ = crate()
    root = m.bones[0]
    arm = Bone(name="Arm", flags=0x100, node_tracks={
        "KGTR": track("KGTR", [0, 1000, 2000], [[0, 0, 0], [10, 5, 0], [0, 0, 0]]),
        "KGRT": track("KGRT", [0, 2000], [[0, 0, 0, 1], [0, 0.6, 0, 0.8]])})
    hand = Bone(name="Hand", flags=0x100, node_tracks={"KGSC": track("KGSC", [0, 2000], [[1, 1, 1], [2, 1, 1]])})
    tip = Helper(name="Tip", flags=0x8, node_tracks={"KGTR": track("KGTR", [0], [[0, 0, 30]])})  # billboarded
    for plain, node, parent in ((0, root, -1), (1, arm, 0), (2, hand, 1), (3, tip, 2)):
        node.object_id = ids[plain]
        node.parent_id = -1 if parent < 0 else _i32(ids[parent])
    m.bones = [root, arm, hand]
    m.helpers = [tip]
    m.pivots = np.zeros((4, 3), "<f4")  # pivots are by object id: keep them at the origin for both
    g0, g1 = m.geosets
    g0.matrix_group_sizes = np.array([1], "<u4")
    g0.matrix_indices = np.array([ids[1]], "<u4")
    g1.matrix_group_sizes = np.array([2], "<u4")
    g1.matrix_indices = np.array([ids[2], ids[0]], "<u4")
    return m


def test_huge_ids_have_one_row_per_node():
    sk = Skeleton(chain_model(HUGE))
    assert sk.count == 4 and sk.ids.tolist() == sorted(HUGE.values())
    assert not [n for n in sk.notes if "parent" in n]
    assert sk.rows([2**32 - 2, 2**31, 12345, -1]).tolist() == [sk.index[2**32 - 2], sk.index[2**31], 4, 4]


def _through(model, how: str):
    if how == "mdx":
        return read_mdx(write_mdx(model), "m.mdx")
    if how == "mdl":
        return read_mdl(write_mdl(model), "m.mdl")
    return model


@pytest.mark.parametrize("how", ["model", "mdx", "mdl"])
def test_huge_ids_pose_like_small_ids(how):
    plain, huge = _through(chain_model(), how), _through(chain_model(HUGE), how)
    assert sorted(n.object_id for n in huge.nodes()) == sorted(HUGE.values())
    a, b = Animator(plain), Animator(huge)
    rows = b.skeleton.rows([HUGE[i] for i in range(4)])
    for t in (0, 700, 1500, 4321):
        pa, pb = a.pose(0, t), b.pose(0, t)
        np.testing.assert_array_equal(pa.node_matrices, pb.node_matrices[rows])
        for gi in range(len(plain.geosets)):
            np.testing.assert_array_equal(pa.palettes[gi], pb.palettes[gi])
            np.testing.assert_array_equal(skin_vertices(plain, gi, pa.node_matrices)[0],
                                          skin_vertices(huge, gi, pb.node_matrices)[0])


def test_missing_and_duplicate_references_are_noted():
    m = chain_model(HUGE)
    m.helpers[0].parent_id = 99  # names no node
    m.bones.append(Bone(name="Twin", object_id=2**31, flags=0x100))
    m.geosets[0].matrix_indices = np.array([2**32 - 7], "<u4")  # names no node
    a = Animator(m)
    notes = " ".join(a.notes)
    assert "missing parent 99" in notes and "used by 'Arm' and 'Twin'" in notes and "name no node" in notes
    assert a.skeleton.count == 4
    assert np.all(np.isfinite(a.pose(0, 100).node_matrices))


def test_huge_ids_render_like_small_ids():
    from renderer.frame import FrameSpec, Renderer

    r = Renderer()
    try:
        for t in (0, 700):
            spec = FrameSpec(sequence=0, time_ms=t, width=48, height=48)
            a = r.render(chain_model(), spec).rgba
            b = r.render(chain_model(HUGE), spec).rgba
            assert a.any() and np.array_equal(a, b)
        broken = chain_model(HUGE)
        broken.helpers[0].parent_id = 99
        broken.bones.append(Bone(name="Twin", object_id=2**31, flags=0x100))
        said = " ".join(d.message for d in r.render(broken, FrameSpec(width=16, height=16)).diagnostics)
        assert "missing parent 99" in said and "used by 'Arm' and 'Twin'" in said  # renderer Diagnostics
    finally:
        r.close()


def test_a_parent_id_written_unsigned_names_the_same_node():
    m = chain_model(HUGE)
    m.bones[1].parent_id = HUGE[0]  # 2^32 - 2 given as an unsigned number: the same 32 bits as -2
    back = read_mdx(write_mdx(m), "wrapped.mdx")
    assert back.bones[1].parent_id == -2
    for model in (m, back):
        sk = Skeleton(model)
        assert sk.parents[sk.index[HUGE[1]]] == sk.index[HUGE[0]] and not [n for n in sk.notes if "parent" in n]
