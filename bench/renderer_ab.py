"""Our renderer against an older checkout of itself, in the same run: frames per second and CPU per
frame of both, rounds alternating (issue 37).

    git worktree add /tmp/modelfarm-old <commit>          # the baseline: any older checkout
    .venv/bin/python bench/renderer_ab.py --baseline /tmp/modelfarm-old [MODEL ...] [--sizes 256,512]

Each side is a child process of this script running `Renderer.render` from its own checkout (this one,
and the baseline's), on the same models, sizes and modes as bench/peer.py: *still* draws the frame at
the first sequence's middle again and again, *animated* advances 1000/60 ms a frame; every frame is read
back (an RGBA array). This side renders a batch as the farm does (`render(..., then=next)`, posing and
issuing the next frame while this one rasterises) unless `--alone`; a baseline without `then` renders
one frame at a time. The sides alternate within each of `--rounds` rounds (which goes first alternates
too). Printed per row: the median fps and CPU ms a frame (user + system of the child, llvmpipe's
threads included) of each side, the medians of the rounds' ratios (fps new / old, CPU old / new: above
1, the new code is faster / cheaper), and the load average before and after the row. On a shared
machine the wall clock follows the other load; the CPU ratio is the steadier figure.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP_MS = 1000 / 60


def child(root: str) -> int:
    """Serve rounds over stdin/stdout with the renderer of checkout `root`."""
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    sys.path.insert(0, root)
    from renderer.formats import load_model
    from renderer.frame import FrameSpec, Renderer

    r, models = Renderer(), {}
    ahead_ok = "then" in inspect.signature(Renderer.render).parameters
    for line in sys.stdin:
        job = json.loads(line)
        model = models.get(job["model"]) or models.setdefault(job["model"], load_model(job["model"]))
        size, t0, animated = job["size"], job["time_ms"], job["mode"] == "animated"

        def spec(k: int, size=size, t0=t0, animated=animated):
            return FrameSpec(time_ms=round(t0 + k * STEP_MS) if animated else t0, width=size, height=size,
                             background="#404040", missing_textures="white")

        k0, n = job["first"], job["frames"]
        ahead = job["ahead"] and ahead_ok
        start, cpu = time.perf_counter(), time.process_time()
        for k in range(k0, k0 + n):
            if ahead:
                r.render(model, spec(k), then=spec(k + 1))
            else:
                r.render(model, spec(k))
        wall, used = time.perf_counter() - start, time.process_time() - cpu
        print(json.dumps({"fps": n / wall, "cpu_ms": used * 1000 / n, "ahead": ahead}), flush=True)
    return 0


class Side:
    def __init__(self, root: Path):
        self.p = subprocess.Popen([sys.executable, __file__, "--child", str(root)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, cwd=str(root))

    def run(self, **job) -> dict:
        self.p.stdin.write(json.dumps(job) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"the child for {job['model']} ended")
        return json.loads(line)

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=60)


def row(new: Side, old: Side, path: Path, size: int, mode: str, t0: int, args) -> dict:
    load0 = os.getloadavg()[0]
    job = {"model": str(path), "size": size, "mode": mode, "time_ms": t0, "ahead": not args.alone}
    for side in (new, old):  # warm up: programs, textures, effects at the time
        side.run(**job, first=0, frames=3)
    rounds, first = [], 3
    for i in range(args.rounds):
        got = {}
        for side in ((new, old) if i % 2 == 0 else (old, new)):
            got[side] = side.run(**job, first=first, frames=args.frames)
        first += args.frames
        rounds.append((got[new], got[old]))
    return {"model": path.stem, "size": size, "mode": mode,
            "new_fps": statistics.median(n["fps"] for n, _ in rounds),
            "old_fps": statistics.median(o["fps"] for _, o in rounds),
            "fps_ratio": statistics.median(n["fps"] / o["fps"] for n, o in rounds),
            "new_cpu_ms": statistics.median(n["cpu_ms"] for n, _ in rounds),
            "old_cpu_ms": statistics.median(o["cpu_ms"] for _, o in rounds),
            "cpu_ratio": statistics.median(o["cpu_ms"] / n["cpu_ms"] for n, o in rounds),
            "ahead": rounds[0][0]["ahead"], "load": [load0, os.getloadavg()[0]]}


def line(r: dict) -> str:
    return (f"{r['model'][:19]:<20}{r['size']:>5} {r['mode']:<9}{r['new_fps']:>8.1f}{r['old_fps']:>8.1f}"
            f"{r['fps_ratio']:>7.2f}{r['new_cpu_ms']:>9.2f}{r['old_cpu_ms']:>8.2f}{r['cpu_ratio']:>7.2f}"
            f"{r['load'][0]:>7.1f}{r['load'][1]:>6.1f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--baseline", type=Path, help="an older checkout of this repository")
    ap.add_argument("--sizes", default="256,512")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--alone", action="store_true", help="the new side renders one frame at a time too")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child)
    if args.baseline is None or not (args.baseline / "renderer" / "frame.py").is_file():
        ap.error("--baseline must name a checkout of this repository")
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from peer import default_models

    from farm.look import default_time
    from renderer.formats import load_model
    from renderer.frame import resolve_sequence

    with tempfile.TemporaryDirectory(prefix="modelfarm-ab-") as tmp:
        models = [m.resolve() for m in args.models] or default_models(ROOT.parent / "shared" / "corpus", Path(tmp))
        new, old = Side(ROOT), Side(args.baseline.resolve())
        print(f"{'model':<20}{'size':>5} {'mode':<9}{'new fps':>8}{'old':>8}{'ratio':>7}{'new cpu':>9}{'old':>8}"
              f"{'ratio':>7}{'load':>7}{'after':>6}")
        rows = []
        try:
            for path in models:
                model = load_model(path)
                t0 = default_time(model, resolve_sequence(model, None))
                for size in (int(s) for s in args.sizes.split(",")):
                    for mode in ("still", "animated"):
                        rows.append(row(new, old, path, size, mode, t0, args))
                        print(line(rows[-1]), flush=True)
        finally:
            new.close()
            old.close()
    if rows:
        print(f"median fps new / old {statistics.median(r['fps_ratio'] for r in rows):.2f}, CPU old / new"
              f" {statistics.median(r['cpu_ratio'] for r in rows):.2f}; load average"
              f" {min(r['load'][0] for r in rows):.1f}-{max(r['load'][1] for r in rows):.1f} on {os.cpu_count()} cores")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
