"""What the renderer keeps to make a small frame cheap (issue 37 items 2-3: the animator's last pose, the
palette buffer's last upload, the frame uniforms of the last camera) changes no frame: a renderer that
has drawn many frames, of several models, still and animated, at several sizes and modes, in an order
that goes back and forth, gives for each one the bytes (pixels and trace) of a fresh renderer drawing
that frame alone."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from conftest import corpus_files
from render_util import renderer

from renderer.anim import Animator
from renderer.anim.skeleton import BILLBOARDED
from renderer.formats import load_model
from renderer.frame import FrameSpec, Renderer
from renderer.samples import write_samples

CORPUS_MODELS = ("OrcMale.mdx", "Ghost.mdx")  # many small skinned parts; 47 additive layers
STEP_MS = 1000 / 60


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("samples")
    write_samples(d)
    return d


def digest(frame) -> str:
    h = hashlib.sha256(frame.rgba.tobytes())
    h.update(json.dumps(frame.trace, sort_keys=True).encode())
    return h.hexdigest()


def specs(model) -> list[FrameSpec]:
    """A model's frames: one time again and again, then steps of a viewer's frame, at two sizes, with
    the modes that change what is drawn (fit camera and MSAA, model lights and events, wireframe),
    and crate's other sequences (a spin, a death that fades a geoset)."""
    seq = model.sequences[0] if model.sequences else None
    t0 = (seq.interval[1] - seq.interval[0]) // 2 if seq else 0
    out = [FrameSpec(time_ms=t0, width=64, height=64, background="#404040")] * 3
    out += [FrameSpec(time_ms=t0 + k * STEP_MS, width=size, height=size, background="#404040")
            for size in (64, 96) for k in (1, 2)]
    out += [FrameSpec(time_ms=t0, width=80, height=64, camera="fit", msaa=4),
            FrameSpec(time_ms=t0 + 300, width=64, height=64, lights="model", events="model"),
            FrameSpec(time_ms=t0, width=64, height=64, wireframe=True)]
    if model.name == "Crate":
        out += [FrameSpec(sequence="Spin", time_ms=t, width=64, height=64) for t in (0, 700, 700, 1400)]
        out += [FrameSpec(sequence="Death", time_ms=t, width=64, height=64) for t in (100, 900)]
    return out


def test_a_renderer_that_drew_many_frames_gives_the_bytes_of_fresh_renderers(samples):
    models = [load_model(p) for p in sorted(samples.glob("*.mdx"))]
    models += [load_model(found[0]) for name in CORPUS_MODELS if (found := corpus_files(name))]
    fresh = {}
    for m in models:
        for spec in dict.fromkeys(specs(m)):
            with Renderer() as alone:
                fresh[(id(m), spec)] = digest(alone.render(m, spec))
    kept = renderer()
    kept.reset_effects()
    batches = [(m, specs(m)) for m in models]
    # forwards and backwards, models interleaved, each model's frames as one batch (rendered ahead)
    for order in (batches, [(m, s[::-1]) for m, s in batches[::-1]]):
        for m, batch in order:
            kept.reset_effects()  # fresh renderers simulate from 0: so does each batch here
            for i, spec in enumerate(batch):
                then = batch[i + 1] if i + 1 < len(batch) else None
                assert digest(kept.render(m, spec, then=then)) == fresh[(id(m), spec)], (m.name, spec)
    for m in models:
        kept.forget(m)
    assert len(set(fresh.values())) > len(fresh) * 0.7  # the frames really differ (times, sizes, modes)


def test_a_pose_is_shared_only_with_calls_that_would_compute_the_same_one(samples):
    crate = load_model(samples / "crate.mdx")
    animator = Animator(crate)
    a, b = animator.pose("Spin", 700), animator.pose("Spin", 700)
    assert b.node_matrices is a.node_matrices and b.palettes is a.palettes  # a still frame again
    c = animator.pose("Spin", 900)
    assert c.node_matrices is not a.node_matrices and not np.array_equal(c.node_matrices, a.node_matrices)
    stand = [animator.pose("Stand", t) for t in (0, 1500)]  # no track has keys in Stand: nothing moves
    assert stand[1].node_matrices is stand[0].node_matrices
    assert (stand[0].t_ms, stand[1].t_ms, stand[1].clock.t_ms) == (0.0, 1500.0, 1500.0)
    for pose in (a, b, c, *stand):  # each as a fresh animator computes it
        alone = Animator(crate).pose(pose.sequence, pose.t_ms)
        assert np.array_equal(alone.node_matrices, pose.node_matrices) and alone.clock == pose.clock
        assert all(np.array_equal(x, y) for x, y in zip(alone.palettes, pose.palettes, strict=True))


def test_a_billboarded_pose_is_computed_again_for_another_view(samples):
    crate = load_model(samples / "crate.mdx")
    crate.bones[0].flags |= BILLBOARDED
    animator = Animator(crate)
    assert animator.skeleton.track_rotation
    views = [np.eye(4), np.array([[0, 1, 0, 0], [-1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], float)]
    first, turned, again = (animator.pose("Stand", 0, v) for v in (views[0], views[1], views[1]))
    assert not np.array_equal(first.node_matrices, turned.node_matrices)  # the view turns the bone
    assert again.node_matrices is turned.node_matrices
    assert np.array_equal(Animator(crate).pose("Stand", 0, views[0]).node_matrices, first.node_matrices)


def test_the_palette_buffer_uploads_what_it_does_not_hold(samples):
    from renderer.scene import upload_palettes

    r = renderer()
    model = load_model(samples / "crate.mdx")
    spec = FrameSpec(sequence="Spin", time_ms=700, width=32, height=32)
    r.render(model, spec)
    _, _, _, pose, _ = r._pose(model, spec)
    palette = r._palette
    calls = []
    real = palette.upload
    palette.upload = lambda m: (calls.append(m.copy()), real(m))
    try:
        upload_palettes(pose, palette)  # the frame's own arrays (the still pose again): nothing to copy
        assert calls == []
        other = r._pose(model, FrameSpec(sequence="Spin", time_ms=900, width=32, height=32))[3]
        upload_palettes(other, palette)
        upload_palettes(pose, palette)  # back to the first pose's arrays: uploaded again
        upload_palettes(pose, palette)
        held = list({id(p): p for p in pose.palettes}.values())  # geosets sharing a palette share its rows
        assert len(calls) == 2 and np.array_equal(calls[1], np.concatenate(held))
        assert not np.array_equal(calls[0], calls[1])
    finally:
        del palette.upload
        r.forget(model)
