"""Where a still frame's milliseconds go, per model: posing, issuing the draw calls (Python and
PyOpenGL), llvmpipe rasterising them (glFinish), and reading the pixels back; then what a worker
does next with the frame, encoding it as PNG (ours, and Pillow's encoder for comparison), and the
ratio of our encoding to the frame's render (issue 27: at most a third).

    .venv/bin/python bench/profile_frame.py [--size 512] [--frames 30]

The phases are timed inside one `Renderer.render` by wrapping its steps (the renderer itself is
unchanged); the bare GL floor of bench/render.py is printed next to them. Medians of --frames.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from render import CORPUS, FLOOR_FS, FLOOR_VS, MODELS, best, draw_floor  # noqa: E402

from renderer.formats import load_model  # noqa: E402
from renderer.frame import FrameSpec, Renderer  # noqa: E402


def floor(r: Renderer, model, spec) -> float:
    import numpy as np

    from renderer.camera import resolve_camera
    from renderer.gl.shaders import build_program

    prog = build_program(FLOOR_VS, FLOOR_FS, label="floor")
    gpu = r._gpu(model, spec)
    cam = resolve_camera("auto", model, 0 if model.sequences else None)
    mvp = (cam.projection(1.0) @ cam.view()).astype(np.float32)
    from renderer.gl.framebuffer import Framebuffer

    fb = Framebuffer(spec.width, spec.width)  # kept for the rounds, as the renderer keeps its own
    draw_floor(gpu, prog, mvp, spec.width, fb)
    try:
        return best(7, draw_floor, gpu, prog, mvp, spec.width, fb)
    finally:
        fb.delete()


def encode_ms(frame, rounds: int) -> tuple[float, float]:
    """Median ms of the farm's PNG encoding of a frame (`renderer.png.png_bytes`, what a worker does
    with every frame: Sub filter, ISA-L deflate), and of Pillow's PNG encoder at its defaults (every row
    filter tried, zlib level 6), what the farm used before."""
    import io

    from PIL import Image

    from renderer.png import png_bytes

    def default() -> bytes:
        buf = io.BytesIO()
        Image.fromarray(frame.rgba, "RGBA").save(buf, "PNG", compress_level=6)
        return buf.getvalue()

    out = []
    for fn in (lambda: png_bytes(frame.rgba, frame.trace), default):
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        out.append(statistics.median(times) * 1000)
    return out[0], out[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--frames", type=int, default=30)
    args = ap.parse_args()
    from OpenGL import GL

    import renderer.scene as scene
    from renderer.gl.framebuffer import Framebuffer

    phases: dict[str, list[float]] = {}
    real_draw, real_read, real_pose = scene.draw_model, Framebuffer.read_rgba, Renderer._pose

    def timed(name, fn):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                phases.setdefault(name, []).append(time.perf_counter() - t)
        return run

    def draw(*a, **k):
        timed("issue draws", real_draw)(*a, **k)
        t = time.perf_counter()
        GL.glFinish()
        phases.setdefault("rasterise (glFinish)", []).append(time.perf_counter() - t)

    scene.draw_model = draw
    Framebuffer.read_rgba = timed("read back", real_read)
    Renderer._pose = timed("pose", real_pose)
    print(f"{'model':<14}{'total':>8}{'pose':>8}{'issue':>8}{'raster':>8}{'read':>8}{'floor':>8}{'png':>8}"
          f"{'pillow':>8}{'png/total':>10}  (ms, median)")
    for name, rel, assets in MODELS:
        path = CORPUS / rel
        if not path.is_file():
            continue
        model = load_model(path)
        r = Renderer()
        spec = FrameSpec(width=args.size, height=args.size, time_ms=300,
                         assets=(str(CORPUS / assets),) if assets else ())
        for _ in range(3):
            r.render(model, spec)
        phases.clear()
        totals = []
        for _ in range(args.frames):
            t = time.perf_counter()
            frame = r.render(model, spec)
            totals.append(time.perf_counter() - t)
        med = {k: statistics.median(v) * 1000 for k, v in phases.items()}
        fl = floor(r, model, spec) * 1000
        png, png_zlib = encode_ms(frame, args.frames)
        print(f"{name:<14}{statistics.median(totals) * 1000:8.2f}{med['pose']:8.2f}{med['issue draws']:8.2f}"
              f"{med['rasterise (glFinish)']:8.2f}{med['read back']:8.2f}{fl:8.2f}{png:8.2f}{png_zlib:8.2f}"
              f"{png / (statistics.median(totals) * 1000):10.2f}")
        r.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
