"""Corpus models: every sequence posed at a few times; palette skinning equals the CPU reference."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import corpus_path

from renderer.anim import Animator, look_at
from renderer.anim.skinning import skin_vertices, skin_with_palette
from renderer.formats import load_model
from renderer.model import Bone

SILVERPINE = "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/"
MODELS = {
    "Ghost": ("nazarpunk__wc3-map-edemium-legacy/map/war3mapImported/Ghost.mdx", 145),
    "Darion": (SILVERPINE + "DarionMograineEvil/DarionMograineEvil.mdx", 88),
    "Girl2": (SILVERPINE + "VillagersReReforged/Girl2.mdx", 170),
    "HarvestGolem": (SILVERPINE + "HarvestGolem/HarvestGolem.mdx", 34),
}
VIEW = look_at([300, 200, 150], [0, 0, 60])

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module", params=sorted(MODELS))
def loaded(request):
    rel, bones = MODELS[request.param]
    model = load_model(corpus_path(rel))
    assert len(model.bones) == bones
    return request.param, model, Animator(model)


def test_every_sequence_poses_finite_and_skins_like_the_reference(loaded):
    name, model, animator = loaded
    assert model.sequences
    worst = 0.0
    for si, seq in enumerate(model.sequences):
        d = seq.interval[1] - seq.interval[0]
        times = (0.0, d / 3, 0.77 * d, d + 123.0)
        for k, t in enumerate(times):
            pose = animator.pose(si, t, VIEW)
            assert pose.node_matrices.shape[0] == len({n.object_id for n in model.nodes()})  # one row a node
            assert np.all(np.isfinite(pose.node_matrices)), (name, seq.name, t)
            assert all(np.all(np.isfinite(p)) for p in pose.palettes)
            if k != 1:
                continue
            for gi, g in enumerate(model.geosets):
                ref_pos, ref_nrm = skin_vertices(model, gi, pose.node_matrices)
                pos, nrm = skin_with_palette(pose.palettes[gi], pose.skins[gi], g.vertices, g.normals)
                assert np.all(np.isfinite(pos))
                worst = max(worst, float(np.abs(pos - ref_pos).max(initial=0)))
                np.testing.assert_allclose(pos, ref_pos, atol=1e-4, err_msg=f"{name} {seq.name} geoset {gi}")
                ok = np.linalg.norm(ref_nrm, axis=1) > 0.5
                np.testing.assert_allclose(nrm[ok], ref_nrm[ok], atol=1e-4)
    assert worst < 1e-4


def test_poses_move_something(loaded):
    name, model, animator = loaded
    moved = False
    for si, seq in enumerate(model.sequences):
        d = seq.interval[1] - seq.interval[0]
        a = animator.pose(si, 0).node_matrices
        b = animator.pose(si, d / 2).node_matrices
        moved |= not np.allclose(a, b)
    assert moved, name


def test_skin_indices_are_node_object_ids():
    # The SKIN models of the corpus: every weighted bone index names a Bone record by object id.
    for key in ("Girl2", "HarvestGolem"):
        model = load_model(corpus_path(MODELS[key][0]))
        kinds = {n.object_id: type(n) for n in model.nodes()}
        for g in model.geosets:
            assert g.skin is not None and len(g.skin) == len(g.vertices)
            used = g.skin[:, :4][g.skin[:, 4:] > 0]
            assert all(kinds.get(int(i)) is Bone for i in np.unique(used))
            # here MATS lists every bone in object-id order, so the two readings coincide
            assert np.array_equal(g.matrix_indices, np.arange(len(model.bones)))
        assert Animator(model).skins[0].kind == "skin"


def test_ghost_billboarded_bone_faces_the_camera():
    model = load_model(corpus_path(MODELS["Ghost"][0]))
    a = Animator(model)
    bb = [n for n in model.nodes() if n.flags & 0x8]
    assert bb
    for view in (VIEW, look_at([-50, 300, 20], [0, 0, 50])):
        w = a.pose("Stand", 400, view).node_matrices[a.skeleton.index[bb[0].object_id]]
        x = w[:3, 0] / np.linalg.norm(w[:3, 0])
        np.testing.assert_allclose(x, view[2, :3], atol=1e-9)


@pytest.mark.parametrize("key", ["Girl2", "Ghost", "Darion"])
def test_poses_equal_the_reference_implementation_bit_for_bit(key, monkeypatch):
    # Every array of a pose (palettes included) has exactly the bits the code before the issue #18
    # speed-ups gives (tests/anim_reference.py), over every sequence, with and without a view.
    import dataclasses

    from anim_reference import ReferenceSkeleton, reference_palettes, reference_uv_matrices, same_bits

    import renderer.anim.pose as pose_module

    model = load_model(corpus_path(MODELS[key][0]))
    fast, ref = Animator(model), Animator(model)
    ref.skeleton.__class__ = ReferenceSkeleton
    ref.palettes.build = lambda nodes: reference_palettes(ref.skins, ref.skeleton.count, nodes)
    jobs = [(None, 0.0, None)]
    for si, seq in enumerate(model.sequences):
        d = seq.interval[1] - seq.interval[0]
        jobs += [(si, 0.0, VIEW), (si, d / 3, VIEW), (si, 0.77 * d, None), (si, d + 123.0, VIEW)]
    kept = [fast.pose(si, t, v) for si, t, v in jobs]  # all kept: a later pose must not change them
    for (si, t, v), got in zip(jobs, kept, strict=True):
        with monkeypatch.context() as m:
            m.setattr(pose_module, "uv_matrices", reference_uv_matrices)
            want = ref.pose(si, t, v)
        for f in dataclasses.fields(got):
            a, b = getattr(got, f.name), getattr(want, f.name)
            if isinstance(a, np.ndarray):
                assert same_bits(a, b), (key, si, t, f.name)
            elif f.name == "palettes":
                assert len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b, strict=True)), (key, si, t)
            elif f.name not in ("skins", "notes", "layer_index"):
                assert a == b, (key, si, t, f.name)
