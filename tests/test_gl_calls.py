"""The draw loop's unchecked GL calls, its state cache and its once-per-frame error check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from render_util import FRONT_CAMERA, layer, quad, renderer, solid, write_model

from renderer import blending
from renderer.gl.calls import CHECK_ENV, GLCallError, check, fast
from renderer.gl.state import StateCache, blend_factor

ROOT = Path(__file__).resolve().parents[1]


def _set_everything(state, depth_test: bool, depth_write, cull: bool) -> None:
    """The reference: every part of a layer state set explicitly, through PyOpenGL's checked calls."""
    from OpenGL import GL

    if state.blend is None:
        GL.glDisable(GL.GL_BLEND)
    else:
        GL.glEnable(GL.GL_BLEND)
        GL.glBlendFuncSeparate(*(blend_factor(f) for f in state.blend))
    if depth_test:
        GL.glEnable(GL.GL_DEPTH_TEST)
        GL.glDepthFunc(GL.GL_LEQUAL)
    else:
        GL.glDisable(GL.GL_DEPTH_TEST)
    write = state.depth_write if depth_write is None else depth_write
    GL.glDepthMask(GL.GL_TRUE if write else GL.GL_FALSE)
    if cull:
        GL.glEnable(GL.GL_CULL_FACE)
        GL.glCullFace(GL.GL_BACK)
    else:
        GL.glDisable(GL.GL_CULL_FACE)


def _gl_state():
    """Blend, depth and cull state as GL reports it."""
    from OpenGL import GL

    def on(cap):
        return bool(GL.glIsEnabled(cap))

    blend = tuple(int(GL.glGetIntegerv(q)) for q in (GL.GL_BLEND_SRC_RGB, GL.GL_BLEND_DST_RGB, GL.GL_BLEND_SRC_ALPHA,
                                                     GL.GL_BLEND_DST_ALPHA))
    return {
        "blend": on(GL.GL_BLEND), "factors": blend if on(GL.GL_BLEND) else None,
        "depth_test": on(GL.GL_DEPTH_TEST), "depth_func": int(GL.glGetIntegerv(GL.GL_DEPTH_FUNC)),
        "depth_mask": bool(GL.glGetBooleanv(GL.GL_DEPTH_WRITEMASK)), "cull": on(GL.GL_CULL_FACE),
        "cull_face": int(GL.glGetIntegerv(GL.GL_CULL_FACE_MODE)),
    }


def test_state_cache_leaves_the_state_setting_everything_leaves():
    """A random walk over layer states: after each step the cache's GL state equals what setting
    every part of the same state gives, though the cache skips the calls that change nothing."""
    ctx = renderer().context
    ctx.make_current()
    rng = np.random.default_rng(7)
    steps = []
    for _ in range(60):
        st = blending.LAYER_STATES[int(rng.integers(len(blending.LAYER_STATES)))]
        steps.append((st, bool(rng.integers(2)), [None, True, False][int(rng.integers(3))], bool(rng.integers(2))))
    expected = []
    for st, depth_test, depth_write, cull in steps:
        _set_everything(st, depth_test, depth_write, cull)
        expected.append(_gl_state())
    # Start from a state unlike the first step's, so a cache that assumed anything would show.
    _set_everything(blending.LAYER_STATES[3], False, True, True)
    calls = []
    cache = StateCache()
    real = cache.gl
    counting = type("Counting", (), {})()
    for name in ("glEnable", "glDisable", "glBlendFuncSeparate", "glDepthFunc", "glDepthMask", "glCullFace"):
        fn = getattr(real, name)
        setattr(counting, name, lambda *a, _fn=fn, _n=name: (calls.append(_n), _fn(*a)))
    cache.gl = counting
    for (st, depth_test, depth_write, cull), want in zip(steps, expected, strict=True):
        cache.apply(st, depth_test, depth_write, cull)
        assert _gl_state() == want
    check("the state walk")
    # Setting everything is 6 to 7 calls a step; the cache makes far fewer on the same walk.
    assert len(calls) < 4 * len(steps)


def test_uniform_cache_sets_changed_values_only():
    renderer().context.make_current()
    cache = StateCache()
    seen = []
    for values in [(1,), (1,), (2,), (2,), (1,)]:
        cache.uniform(5, 3, lambda loc, *v: seen.append((loc, v)), *values)
    assert seen == [(3, (1,)), (3, (2,)), (3, (1,))]
    cache.uniform(6, 3, lambda loc, *v: seen.append((loc, v)), 1)  # another program: its own value
    assert len(seen) == 4 and seen[-1] == (3, (1,))


def test_an_error_in_unchecked_calls_is_found_once_per_frame_and_named():
    from OpenGL import GL

    renderer().context.make_current()
    check("a clean start")
    fast().glEnable(0x1234)  # not a capability: GL_INVALID_ENUM, and no exception from the call itself
    with pytest.raises(GLCallError, match=r"after the test's calls: GL_INVALID_ENUM .*RENDERER_GL_CHECK=1"):
        check("the test's calls")
    assert int(GL.glGetError()) == 0  # read out: the next frame starts clean
    check("nothing since")


def test_a_gl_error_in_the_layer_loop_fails_the_frame_and_the_next_frame_is_fine(tmp_path):
    from renderer.formats import load_model
    from renderer.frame import FrameSpec

    path = write_model(tmp_path, "one", [layer(0)], {"a.tga": solid((200, 40, 40, 255))}, [quad()])
    model = load_model(path)
    spec = FrameSpec(width=64, height=64, camera=FRONT_CAMERA, background="#4080c0")
    r = renderer()
    good = r.render(model, spec)
    gpu = r._gpu(model, spec)
    saved = list(gpu.textures)
    gpu.textures[0] = 987654  # never generated: binding it is GL_INVALID_OPERATION in a core context
    try:
        with pytest.raises(GLCallError, match="drawing the model's layers: GL_INVALID_OPERATION"):
            r.render(model, spec)
    finally:
        gpu.textures[:] = saved
    assert np.array_equal(r.render(model, spec).rgba, good.rgba)


_FRAMES = """
import hashlib, json, sys
from pathlib import Path
from renderer.formats import load_model
from renderer.frame import FrameSpec, Renderer
from renderer.gl.calls import fast
from OpenGL.error import GLError
r = Renderer()
out = {}
for path in sorted(Path(sys.argv[1]).glob("*.mdx")):
    model = load_model(path)
    for t in (0, 250, 900):
        f = r.render(model, FrameSpec(width=96, height=96, sequence=0, time_ms=t))
        out[f"{path.name}@{t}"] = hashlib.sha256(f.rgba.tobytes()).hexdigest()
out["checked"] = fast().checked
try:
    fast().glEnable(0x1234)
    out["raised"] = False
except GLError:
    out["raised"] = True
print(json.dumps(out))
"""


def test_the_debug_switch_checks_every_call_and_gives_the_same_bytes(tmp_path):
    """RENDERER_GL_CHECK=1: PyOpenGL's checked functions (an error raises at the call); the sample
    models (textures, texture animation, blend modes, particles and ribbons) give byte-identical
    frames either way."""
    import json

    from renderer.samples import write_samples

    write_samples(tmp_path)
    runs = {}
    for checking in ("0", "1"):
        env = dict(os.environ, **{CHECK_ENV: checking})
        done = subprocess.run([sys.executable, "-c", _FRAMES, str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        runs[checking] = json.loads(done.stdout.strip().splitlines()[-1])
    unchecked, checked = runs["0"], runs["1"]
    assert (unchecked.pop("checked"), unchecked.pop("raised")) == (False, False)
    assert (checked.pop("checked"), checked.pop("raised")) == (True, True)
    assert len(unchecked) >= 9
    assert checked == unchecked
