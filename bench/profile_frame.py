"""Where a still frame's milliseconds go, per model: posing, issuing the draw calls (Python and
PyOpenGL), llvmpipe rasterising them (glFinish), and reading the pixels back; then what a worker
does next with the frame, encoding it as PNG (ours, and Pillow's encoder for comparison), and the
ratio of our encoding to the frame's render (issue 27: at most a third).

    .venv/bin/python bench/profile_frame.py [--size 512] [--frames 30]
    .venv/bin/python bench/profile_frame.py --batch [--frames 30] [--rounds 5] [--split]

The phases are timed inside one `Renderer.render` by wrapping its steps (the renderer itself is
unchanged); the bare GL floor of bench/render.py is printed next to them. Medians of --frames.

`--batch` (issue 37 item 1): a batch of --frames animated frames per row (the sample models at 256
and 512, corpus OrcMale and Ghost at 256), each frame rendered and kept as a worker keeps it (PNG,
store write, blank check), two ways alternated --rounds times in one process: one frame at a time
(render, then keep) and as a batch runs them (`render(then=next)`, the keep behind the render thread
through farm.run.behind; inline where the farm has no farm.run.behind, as before issue 37). Prints
the median wall and CPU ms per frame (CPU: every thread of the process, llvmpipe's too) and the
ratio one-at-a-time / batch. `--split`: where the render thread's time goes in the batch way (its
CPU in all, posing, issuing the draws, waiting for the read-back, PNG encoding when the keep is inline;
the wait's wall).
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


def batch_rows(samples: Path) -> list[tuple[str, Path, tuple, int]]:
    """(label, model path, asset roots, size) of the --batch table."""
    rows = [(p.stem, p, (), size) for size in (256, 512) for p in sorted(samples.glob("*.mdx"))]
    for name, rel, assets in MODELS[:2]:  # OrcMale, Ghost
        if (CORPUS / rel).is_file():
            rows.append((name, CORPUS / rel, (str(CORPUS / assets),) if assets else (), 256))
    return rows


def keeper(store):
    """What a worker does with a frame (farm.run.execute.FRAMES.keep's work): PNG, store, blank check."""
    from farm.images import blank_reason
    from renderer.png import png_bytes

    def keep(frame):
        return store.put_image(png_bytes(frame.rgba, frame.trace)), blank_reason(frame.rgba)
    return keep


def one_batch(r: Renderer, model, specs: list, keep, behind) -> tuple[float, float, float]:
    """(wall s, CPU s, the render thread's CPU s) of a batch: one at a time when `behind` is None, else
    rendered ahead with the keep behind (farm.run.behind.Behind, or inline: 0)."""
    r.reset_effects()
    wall, cpu, mine = time.perf_counter(), time.process_time(), time.thread_time()
    for i, spec in enumerate(specs):
        if behind is None:
            keep(r.render(model, spec))
            continue
        frame = r.render(model, spec, then=specs[i + 1] if i + 1 < len(specs) else None)
        if behind == 0:
            keep(frame)
            continue
        behind.put(i, keep, frame)
        while (due := behind.due()) is not None:
            _ = due.result
            behind.pop()
    while behind not in (None, 0) and (due := behind.due(True)) is not None:
        _ = due.result
        behind.pop()
    return time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - mine


def batch_table(args) -> int:
    import tempfile

    from farm.store import FolderStore
    from renderer.samples import write_samples

    try:  # the keep behind the render thread (issue 37); before it, inline
        from farm.run.behind import Behind
    except ImportError:
        Behind = None  # noqa: N806
    split = _split_timers() if args.split else None
    tmp = Path(tempfile.mkdtemp(prefix="profile-batch-"))
    write_samples(tmp / "samples")
    keep = keeper(FolderStore(tmp / "store"))
    r = Renderer()
    print(f"{args.frames} animated frames a batch, {args.rounds} rounds alternated, medians; keep behind:"
          f" {'farm.run.behind' if Behind else 'inline (no farm.run.behind)'}")
    print(f"{'model':<14}{'size':>5}{'alone wall':>11}{'cpu':>7}{'batch wall':>11}{'cpu':>7}{'wall x':>8}{'cpu x':>7}"
          "  (ms a frame)" + ("   batch, render thread CPU: all " + " ".join(SPLIT) + ", wait wall" if split else ""))
    for label, path, assets, size in batch_rows(tmp / "samples"):
        model = load_model(path)
        seq = model.sequences[0].interval if model.sequences else (0, 0)
        length = max(1, seq[1] - seq[0])
        specs = [FrameSpec(width=size, height=size, time_ms=(i * 33) % length, assets=assets)
                 for i in range(args.frames)]
        one_batch(r, model, specs[:3], keep, None)  # warm: buffers, textures, shaders
        alone, ahead = [], []
        for _ in range(args.rounds):
            alone.append(one_batch(r, model, specs, keep, None))
            behind = Behind() if Behind else 0
            if split:
                split.clear()
            ahead.append(one_batch(r, model, specs, keep, behind))
            if behind:
                behind.close()
        n = args.frames
        aw, ac = (statistics.median(x[i] for x in alone) / n * 1e3 for i in (0, 1))
        bw, bc = (statistics.median(x[i] for x in ahead) / n * 1e3 for i in (0, 1))
        thread = statistics.median(x[2] for x in ahead) / n * 1e3
        parts = ""
        if split:
            cpu_ms = [sum(c for _, c in split.get(k, [])) / n * 1e3 for k in SPLIT]
            wait_ms = sum(w for w, _ in split.get("wait", [])) / n * 1e3
            parts = f"   {thread:.2f} " + " ".join(f"{v:.2f}" for v in cpu_ms) + f" {wait_ms:.2f}"
        print(f"{label:<14}{size:>5}{aw:>11.2f}{ac:>7.2f}{bw:>11.2f}{bc:>7.2f}{aw / bw:>7.2f}x{ac / bc:>6.2f}x{parts}")
        r.forget(model)
    r.close()
    return 0


SPLIT = ("pose", "issue", "wait", "png")


def _split_timers() -> dict:
    """Wrap the render thread's steps (posing, issuing draws, waiting for the read-back, PNG encoding in
    a keep run inline) to sum their time (wall, the thread's CPU) per frame of the last batch way round."""
    import threading

    import renderer.gl.framebuffer as fbm
    import renderer.scene as scene

    spent: dict[str, list[tuple[float, float]]] = {}

    def wrap(owner, attr, name):
        real = getattr(owner, attr, None)
        if real is None:
            return

        def run(*a, **k):
            if threading.current_thread() is not threading.main_thread():
                return real(*a, **k)
            t, c = time.perf_counter(), time.thread_time()
            try:
                return real(*a, **k)
            finally:
                spent.setdefault(name, []).append((time.perf_counter() - t, time.thread_time() - c))
        setattr(owner, attr, run)

    wrap(Renderer, "_pose", "pose")
    wrap(scene, "draw_model", "issue")
    wrap(fbm.Framebuffer, "finish_read", "wait")  # after issue 37
    wrap(fbm.Framebuffer, "read_rgba", "wait")  # before it
    import renderer.png as png

    wrap(png, "encode_png", "png")
    return spent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--batch", action="store_true", help="the batch table of issue 37 (see the docstring)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--split", action="store_true", help="with --batch: the render thread's time, split")
    args = ap.parse_args()
    if args.batch:
        return batch_table(args)
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
