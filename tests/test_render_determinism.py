"""A frame is a pure function of its trace: same bytes across processes, batches and orders."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT
from render_util import renderer

from renderer.formats import load_model
from renderer.frame import FrameSpec
from renderer.png import read_png
from renderer.samples import write_samples


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    d = tmp_path_factory.mktemp("samples")
    write_samples(d)
    return d


def test_same_trace_in_five_fresh_processes_gives_identical_png_bytes(samples, tmp_path):
    digests = set()
    for i in range(5):
        out = tmp_path / f"crate{i}.png"
        r = subprocess.run([sys.executable, "-m", "farm.cli", "render", str(samples / "crate.mdx"), "--sequence",
                            "spin", "--time", "333", "--size", "96x96", "--msaa", "4", "-o", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env={"EGL_PLATFORM": "surfaceless", "PYOPENGL_PLATFORM": "egl", "PATH": "/usr/bin:/bin"})
        assert r.returncode == 0, r.stderr
        digests.add(hashlib.sha256(out.read_bytes()).hexdigest())
    assert len(digests) == 1
    rgba, trace = read_png(out)
    assert trace["sequence"] == "Spin" and trace["time_ms"] == 333 and trace["msaa"] >= 1
    assert trace["model_hash"] == hashlib.sha256((samples / "crate.mdx").read_bytes()).hexdigest()
    assert {"renderer", "version", "driver_version", "cpu_vendor"} <= set(trace["gl"])
    assert (rgba[..., 3] > 0).sum() > 500


def test_batch_order_does_not_change_pixels(samples):
    model = load_model(samples / "crate.mdx")
    times = [0, 400, 1200, 1999]

    def frames(order):
        out = {}
        for t in order:
            out[t] = renderer().render(model, FrameSpec(sequence="Spin", time_ms=t, width=64, height=64)).rgba
        return out

    forward, backward = frames(times), frames(times[::-1])
    for t in times:
        np.testing.assert_array_equal(forward[t], backward[t])
    assert not np.array_equal(forward[0], forward[400])  # the crate really turns


def test_the_pose_changes_the_picture_the_way_the_track_says(samples):
    model = load_model(samples / "crate.mdx")
    death = [renderer().render(model, FrameSpec(sequence="Death", time_ms=t, width=64, height=64,
                                                 background="#000000")).rgba for t in (0, 1000)]
    covered = [int((f[..., :3].max(axis=2) > 0).sum()) for f in death]
    # Death scales the crate's Z to 0.2 and fades the lid out: far fewer pixels at the end.
    assert covered[1] < covered[0] * 0.6


def test_what_a_renderer_keeps_between_frames_changes_no_frame(samples):
    """The renderer keeps a model's cameras and the time-free part of its traces between frames
    (issue 27): a fresh renderer, and a renderer whose caller changed the last frame's trace and
    camera matrices, give the same pixels and trace at every time, camera rule and size."""
    from renderer.frame import Renderer

    kept = renderer()
    model = load_model(samples / "effects.mdx")
    for camera in ("auto", "fit"):
        for t, size in ((0, 64), (250, 64), (250, 80), (900, 64)):
            spec = FrameSpec(time_ms=t, width=size, height=64, camera=camera)
            a = kept.render(model, spec)
            a.trace["camera"]["eye"][0] = 1e9  # a caller's change stays in its own copy
            a.trace["gl"]["renderer"] = "changed"
            with Renderer() as fresh:
                b = fresh.render(model, spec)
            c = kept.render(model, spec)
            assert np.array_equal(b.rgba, c.rgba) and b.trace == c.trace, (camera, t, size)
            assert c.trace["time_ms"] == t
    cam = kept._camera(model, FrameSpec(), 0, 1.0)
    cam.view()[0, 0] = 7.0
    assert cam.view()[0, 0] != 7.0
    kept.forget(model)
    assert id(model) not in kept._memos
