"""Still-frame render time against the bare GL floor, measured side by side in one run.

For a few corpus models at 512x512: `Renderer.render` (pose, palettes, every layer with its
state and texture, readback, trace) versus the floor: the same vertex buffers drawn with a
trivial shader into the same size of framebuffer (kept between frames, as the renderer keeps its
own) and read back. The two are timed alternately; prints the best time of each and the median of
the per-round ratios per model.

    .venv/bin/python bench/render.py [--size 512] [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial
from pathlib import Path

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from renderer.formats import load_model  # noqa: E402
from renderer.frame import FrameSpec, Renderer  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
MODELS = [
    ("OrcMale", "pqhuy98__Warcraft3/icecrown-citadel-old/maps/icecrown-citadel.w3x/OrcMale.mdx", None),
    ("Ghost", "nazarpunk__wc3-map-edemium-legacy/map/war3mapImported/Ghost.mdx",
     "nazarpunk__wc3-map-edemium-legacy/map"),
    ("Girl2", "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/VillagersReReforged/Girl2.mdx",
     "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x"),
    ("HarvestGolem", "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/HarvestGolem/HarvestGolem.mdx",
     None),
]

FLOOR_VS = """
#version 330 core
layout(location = 0) in vec3 a_position;
uniform mat4 u_mvp;
void main() { gl_Position = u_mvp * vec4(a_position, 1.0); }
"""
FLOOR_FS = """
#version 330 core
out vec4 frag;
void main() { frag = vec4(0.8, 0.8, 0.8, 1.0); }
"""


def best(rounds: int, fn, *args) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return min(times)


def draw_floor(gpu, program: int, mvp, size: int, fb=None) -> None:
    """The same vertex buffers, a constant-colour shader, depth test, one readback, into `fb` (a
    Framebuffer of this size that the caller keeps between calls, as the renderer keeps its own),
    or into a new one made and deleted for this call."""
    from OpenGL import GL

    from renderer.gl.framebuffer import Framebuffer

    target = fb if fb is not None else Framebuffer(size, size)
    target.clear((0, 0, 0, 0))
    GL.glEnable(GL.GL_DEPTH_TEST)
    GL.glUseProgram(program)
    GL.glUniformMatrix4fv(GL.glGetUniformLocation(program, "u_mvp"), 1, GL.GL_TRUE, mvp)
    for buf in gpu.geosets:
        if buf is not None:
            GL.glBindVertexArray(buf.vao)
            buf.draw()
    GL.glBindVertexArray(0)
    target.read_rgba()
    if fb is None:
        target.delete()


def paired(rounds: int, a, b) -> tuple[float, float, float]:
    """a() and b() timed alternately `rounds` times: (best a, best b, median of a/b per round).
    The per-round ratio cancels most of the load a shared machine puts on both."""
    ta, tb = [], []
    for _ in range(rounds):
        for fn, out in ((a, ta), (b, tb)):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    ratios = sorted(x / y for x, y in zip(ta, tb, strict=True))
    return min(ta), min(tb), ratios[len(ratios) // 2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    import numpy as np

    from renderer.camera import resolve_camera
    from renderer.gl.framebuffer import Framebuffer
    from renderer.gl.shaders import build_program

    r = Renderer()
    info = r.gl_info()
    print(f"GL: {info['renderer']} | {info['version']} | {args.size}x{args.size}, {args.rounds} rounds of frame then"
          f" floor: best times, median of the per-round ratios")
    print(f"{'model':<14}{'render ms':>11}{'floor ms':>10}{'ratio':>8}   triangles")
    floor_prog = floor_fb = None
    for name, rel, assets in MODELS:
        path = CORPUS / rel
        if not path.exists():
            print(f"{name:<14} (not in the corpus here)")
            continue
        model = load_model(path)
        spec = FrameSpec(width=args.size, height=args.size, time_ms=300,
                         assets=(str(CORPUS / assets),) if assets else ())
        r.render(model, spec)  # warm: uploads buffers and textures once
        if floor_prog is None:
            floor_prog = build_program(FLOOR_VS, FLOOR_FS, label="floor")
        gpu = r._gpu(model, spec)
        cam = resolve_camera("auto", model, 0 if model.sequences else None)
        mvp = (cam.projection(1.0) @ cam.view()).astype(np.float32)
        if floor_fb is None:
            floor_fb = Framebuffer(args.size, args.size)
        draw_floor(gpu, floor_prog, mvp, args.size, floor_fb)
        render_s, floor_s, ratio = paired(args.rounds, partial(r.render, model, spec),
                                          partial(draw_floor, gpu, floor_prog, mvp, args.size, floor_fb))
        tris = sum(len(g.triangles) for g in model.geosets)
        print(f"{name:<14}{render_s * 1e3:>11.2f}{floor_s * 1e3:>10.2f}{ratio:>7.2f}x   {tris}")
        r.forget(model)
    r.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
