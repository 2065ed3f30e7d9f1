"""GPU skinning read back with transform feedback equals the CPU reference skinning."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CORPUS
from render_util import renderer

from renderer.anim import Animator, skin_vertices
from renderer.camera import resolve_camera
from renderer.formats import load_model
from renderer.frame import FrameSpec, resolve_sequence

MODELS = {
    # matrix groups (GNDX/MTGC/MATS), up to 145 bones
    "nazarpunk__wc3-map-edemium-legacy/map/war3mapImported/Ghost.mdx": ("Stand", 700),
    "pqhuy98__Warcraft3/icecrown-citadel-old/maps/icecrown-citadel.w3x/OrcMale.mdx": ("Walk", 333),
    # Reforged SKIN weights, 170 bones
    "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/VillagersReReforged/Girl2.mdx": (0, 450),
    "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/HarvestGolem/HarvestGolem.mdx": (1, 600),
}


@pytest.mark.parametrize("rel", list(MODELS), ids=[r.rsplit("/", 1)[1] for r in MODELS])
def test_gpu_skinning_matches_the_cpu_reference(rel):
    path = CORPUS / rel
    if not path.exists():
        pytest.skip("corpus not present")
    model = load_model(path)
    sequence, t = MODELS[rel]
    spec = FrameSpec(sequence=sequence, time_ms=t, width=64, height=64)
    gpu = renderer().skinned_vertices(model, spec)
    seq = resolve_sequence(model, sequence)
    view = resolve_camera("auto", model, seq).view()
    nodes = Animator(model).pose(seq, t, view).node_matrices
    radius = max(float(np.abs(np.concatenate([g.vertices for g in model.geosets])).max()), 1.0)
    checked = moved = 0
    for gi, got in enumerate(gpu):
        if got is None:
            continue
        want_p, want_n = skin_vertices(model, gi, nodes)
        np.testing.assert_allclose(got[0], want_p, atol=1e-4, rtol=0)
        ok = np.linalg.norm(want_n, axis=1) > 0.5
        np.testing.assert_allclose(got[1][ok], want_n[ok], atol=1e-4)
        checked += len(want_p)
        moved += int((np.abs(want_p - model.geosets[gi].vertices) > 1e-3 * radius).any(axis=1).sum())
    assert checked > 1000
    assert moved > checked // 10  # the pose really moves the mesh away from the bind pose
