"""CPU milliseconds per frame of small frames (issue 37 items 2-3), this checkout against another one,
measured in the same run: the sample models filter_modes and crate, and the corpus' OrcMale when
present, at 256 px, still and animated, rendered as bench/peer.py's side of ours renders them (a batch:
`Renderer.render(..., then=next)`, auto camera, the middle of the first sequence, a #404040 background,
white for missing textures, 1000/60 ms a frame when animated).

    .venv/bin/python bench/frame_cpu.py [--against /tmp/wt-base] [--rounds 5] [--frames 300] [--size 256]
    .venv/bin/python bench/frame_cpu.py --profile ROW [--frames 2000]   # cProfile of one row, this checkout

Each side runs in its own process (its root first on sys.path), the sides alternating per round (the
first side alternating too); a round is `--frames` frames of every row after a warm-up. CPU time is the
process's (user + system, llvmpipe's threads included: `time.process_time`); the columns beside it
split it by phase (the renderer's _prepare: pose, effects, lights; _issue: the GL calls; _finish: the
read back and the trace). Printed: the median over rounds of each side, and the median of the rounds'
ratios (other / this: above 1, this checkout spends less).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
STEP_MS = 1000 / 60  # bench/viewer.py's VIEWER_STEP_MS: the viewer's frame
CORPUS_ROWS = {"OrcMale": "pqhuy98__Warcraft3/icecrown-citadel-old/maps/icecrown-citadel.w3x/OrcMale.mdx"}
PHASES = ("_prepare", "_issue", "_finish")


def model_paths(scratch: Path) -> dict[str, Path]:
    """filter_modes and crate written into `scratch` (renderer.samples), and the corpus rows present."""
    from renderer.samples import write_samples

    paths = {p.stem: p for p in write_samples(scratch) if p.stem in ("filter_modes", "crate")}
    paths.update({name: CORPUS / rel for name, rel in CORPUS_ROWS.items() if (CORPUS / rel).is_file()})
    return paths


class Row:
    """One model at one size in one mode, rendered in batches by one renderer."""

    def __init__(self, renderer, path: Path, size: int, mode: str):
        from farm.look import default_time
        from renderer.formats import load_model
        from renderer.frame import FrameSpec, resolve_sequence

        self.r, self.mode, self.k = renderer, mode, 0
        self.model = load_model(path)
        self.t0 = default_time(self.model, resolve_sequence(self.model, None))
        self.spec = lambda t: FrameSpec(time_ms=t, width=size, height=size, camera="auto", background="#404040",
                                        missing_textures="white")
        self.batch(5)

    def at(self, k: int):
        return self.spec(self.t0 + k * STEP_MS if self.mode == "animated" else self.t0)

    def batch(self, frames: int) -> None:
        step = 1 if self.mode == "animated" else 0
        for i in range(frames):
            self.k += step
            self.r.render(self.model, self.at(self.k), then=None if i + 1 == frames else self.at(self.k + step))


def phase_clock(spent: dict[str, float]) -> None:
    """Add each renderer phase's process CPU seconds into `spent` (wrapping the methods)."""
    from renderer.frame import Renderer

    for name in PHASES:
        real = getattr(Renderer, name)

        def timed(*a, _real=real, _name=name, **k):
            t = time.process_time()
            try:
                return _real(*a, **k)
            finally:
                spent[_name] += time.process_time() - t

        setattr(Renderer, name, timed)


def child(args) -> int:
    """One side: read (row names, frames) rounds from stdin, answer each with a JSON line."""
    sys.path.insert(0, args.child)
    os.chdir(args.child)
    from renderer.frame import Renderer

    spent = dict.fromkeys(PHASES, 0.0)
    phase_clock(spent)
    r = Renderer()
    paths = {name: Path(p) for name, p in json.loads(args.paths).items()}
    rows = {f"{name} {mode}": Row(r, path, args.size, mode) for name, path in paths.items()
            for mode in ("still", "animated")}
    print(json.dumps(list(rows)), flush=True)
    for line in sys.stdin:
        frames = int(line)
        out = {}
        for name, row in rows.items():
            for k in spent:
                spent[k] = 0.0
            cpu = time.process_time()
            row.batch(frames)
            out[name] = [(time.process_time() - cpu) * 1000 / frames] + [spent[k] * 1000 / frames for k in PHASES]
        print(json.dumps(out), flush=True)
    return 0


def side(root: Path, paths: dict, size: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(root), EGL_PLATFORM="surfaceless", PYOPENGL_PLATFORM="egl")
    return subprocess.Popen([sys.executable, str(HERE), "--child", str(root), "--size", str(size),
                             "--paths", json.dumps({k: str(v) for k, v in paths.items()})],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def compare(args, paths: dict) -> int:
    roots = [ROOT] + ([Path(args.against).resolve()] if args.against else [])
    procs = [side(root, paths, args.size) for root in roots]
    names = [json.loads(p.stdout.readline()) for p in procs][0]
    got: list[list[dict]] = [[] for _ in procs]
    for i in range(args.rounds):
        order = range(len(procs)) if i % 2 == 0 else reversed(range(len(procs)))
        for s in order:
            procs[s].stdin.write(f"{args.frames}\n")
            procs[s].stdin.flush()
            got[s].append(json.loads(procs[s].stdout.readline()))
    for p in procs:
        p.stdin.close()
        p.wait()
    print(f"load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds of {args.frames} frames at {args.size} px;"
          " CPU ms a frame, median over rounds (total = prepare + issue + finish + the rest)")
    head = f"{'row':<22}" + "".join(f"{h:>9}" for h in ("total", "prepare", "issue", "finish"))
    print(head + (f"  |{'other':>8}{'prepare':>9}{'issue':>9}{'finish':>9}{'ratio':>8}" if args.against else ""))
    for name in names:
        med = [[statistics.median(r[name][c] for r in side_rows) for c in range(4)] for side_rows in got]
        line = f"{name:<22}" + "".join(f"{v:9.3f}" for v in med[0])
        if args.against:
            ratio = statistics.median(b[name][0] / a[name][0] for a, b in zip(got[0], got[1], strict=True))
            line += "  |" + f"{med[1][0]:8.3f}" + "".join(f"{v:9.3f}" for v in med[1][1:]) + f"{ratio:8.2f}"
        print(line, flush=True)
    return 0


def profile(args, paths: dict) -> int:
    from renderer.frame import Renderer

    name, mode = args.profile.split()
    row = Row(Renderer(), paths[name], args.size, mode)
    prof = cProfile.Profile()
    prof.enable()
    row.batch(args.frames)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--against", help="another checkout of the project (its root), measured beside this one")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--profile", metavar="ROW", help="cProfile one row of this checkout, e.g. 'crate still'")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--paths", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    if args.child:
        return child(args)
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="frame-cpu-") as scratch:
        paths = model_paths(Path(scratch))
        return profile(args, paths) if args.profile else compare(args, paths)


if __name__ == "__main__":
    sys.exit(main())
