r"""`farm thumbnails` throughput on the corpus: models per minute with 1 and 2 local processes.

    .venv/bin/python bench/thumbnails.py [--corpus ../shared/corpus] [--size 256] [--repeat 3]
                                         [--format png|webp] [--copies K] [--shared N]

Each run makes the thumbnails of every model under the corpus into a fresh folder (nothing is up to
date: every model is hashed, loaded, rendered, encoded and written; contact sheets and the index are
drawn), exactly as `farm thumbnails CORPUS --out DIR --workers N` does. Runs of the two modes are
interleaved and the best of --repeat is kept, so both see the same machine load. Printed:

* models per minute for x1 and x2, and the ratio x2 / x1 (the scaling of the process pool);
* start-up: the same command on a folder with one small model (spawning the pool, imports, GL
  contexts, llvmpipe compiling shaders on first draw); and the rate with that taken out, which is
  what a large tree approaches, since the corpus itself takes only a few seconds. --copies K runs
  on K copies of the corpus instead, a tree where the fixed costs (start-up, the last contact
  sheet) weigh less.

With --shared N, also a tree of N models that share one 1024x1024 texture (as hundreds of units
share `Textures\X.blp`), in one process, with the per-process decode cache (renderer.assets.cache)
and without it (DECODE_CACHE_MB=0): models per minute for both and their ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def timed(roots: list[Path], out: Path, workers: int, size: int, fmt: str, cpu: dict | None = None
          ) -> tuple[float, int, int]:
    """Wall seconds, models, failures of one run; `cpu["s"]`: this process's CPU seconds in it (all
    its threads: the coordinator's own work, which competes with the workers for the cores)."""
    import resource

    from farm.thumbs import ThumbnailOptions, make_thumbnails

    def used() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    c0, t0 = used(), time.perf_counter()
    s = make_thumbnails(roots, out, ThumbnailOptions(size=size, format=fmt), workers=workers, broker="local",
                        progress=False)
    if cpu is not None:
        cpu["s"] = used() - c0
    return time.perf_counter() - t0, s.models, len(s.failed)


def shared(args) -> None:
    import subprocess

    import numpy as np
    from PIL import Image

    from renderer.samples import write_samples

    with tempfile.TemporaryDirectory(prefix="bench-shared-") as tmp:
        tmp = Path(tmp)
        samples = tmp / "samples"
        write_samples(samples)
        tree = tmp / "tree"
        (tree / "Textures").mkdir(parents=True)
        rng = np.random.default_rng(1)
        Image.fromarray(rng.integers(0, 255, (1024, 1024, 4), dtype=np.uint8), "RGBA").save(
            tree / "Textures" / "Crate.tga")
        for i in range(args.shared):
            d = tree / f"unit{i:04d}"
            d.mkdir()
            shutil.copy(samples / "crate.mdx", d / "crate.mdx")
        rates = {}
        for label, mb in (("cache", ""), ("no cache", "0")):
            env = dict(os.environ, DECODE_CACHE_MB=mb)
            code = (f"import sys, time; sys.path.insert(0, {str(ROOT)!r}); from farm.thumbs import ThumbnailOptions,"
                    f" make_thumbnails; t = time.perf_counter(); s = make_thumbnails([{str(tree)!r}],"
                    f" {str(tmp / label.replace(' ', '-'))!r}, ThumbnailOptions(size=64, sheet=0), workers=1,"
                    f" broker='local', progress=False); print(s.models, time.perf_counter() - t)")
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            n, dt = out.stdout.split()
            rates[label] = int(n) / float(dt) * 60
        print(f"{args.shared} models sharing one 1024x1024 texture, 1 process: with the decode cache"
              f" {rates['cache']:.0f} models/min, without {rates['no cache']:.0f} models/min,"
              f" ratio {rates['cache'] / rates['no cache']:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--format", choices=("png", "webp"), default="png")
    ap.add_argument("--shared", type=int, default=0, metavar="N", help="also N models sharing one texture:"
                                                                      " the decode cache on and off")
    ap.add_argument("--copies", type=int, default=1, metavar="K",
                    help="the tree is K copies of the corpus (a larger tree: fixed costs weigh less)")
    args = ap.parse_args()
    if args.shared:
        shared(args)
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        print(f"bench/thumbnails.py: no corpus at {corpus}", file=sys.stderr)
        return 2
    from farm.run.local import default_workers

    modes = (1, 2)
    best: dict[int, float] = {}
    start: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-thumbs-") as tmp:
        tmp = Path(tmp)
        one = tmp / "one"
        one.mkdir()
        small = min((p for p in corpus.rglob("*.mdx") if p.name == "cube.mdx"), default=None)
        if small is None:
            small = min(corpus.rglob("*.mdx"), key=lambda p: p.stat().st_size)
        shutil.copy(small, one / small.name)
        tree = corpus
        if args.copies > 1:
            tree = tmp / "tree"
            for k in range(args.copies):
                shutil.copytree(corpus, tree / f"copy{k + 1}")
        models = failed = 0
        coordinator: dict[int, float] = {}
        for r in range(args.repeat):
            for w in modes:
                cpu: dict = {}
                dt, models, failed = timed([tree], tmp / f"x{w}-{r}", w, args.size, args.format, cpu)
                if dt < best.get(w, float("inf")):
                    coordinator[w] = cpu["s"]
                best[w] = min(best.get(w, dt), dt)
                dt1, _, _ = timed([one], tmp / f"start-x{w}-{r}", w, args.size, args.format)
                start[w] = min(start.get(w, dt1), dt1)
    copies = f" x {args.copies} copies" if args.copies > 1 else ""
    print(f"thumbnails of {corpus}{copies}: {models} models ({failed} fail to load: placeholder tiles), {args.size} px,"
          f" {args.format}; best of {args.repeat}; {default_workers()} cores available")
    for w in modes:
        steady = models / max(best[w] - start[w], 1e-9) * 60
        print(f"  x{w}: {best[w]:6.2f} s = {models / best[w] * 60:7.0f} models/min   start-up {start[w]:5.2f} s,"
              f" without it {steady:7.0f} models/min")
    print(f"  ratio x2 / x1: {best[1] / best[2]:.2f} (whole runs),"
          f" {(best[1] - start[1]) / max(best[2] - start[2], 1e-9):.2f} (without start-up)")
    print("  the coordinator's own CPU time (this process: results, thumbnail and journal writes, contact"
          " sheets):")
    for w in modes:
        print(f"    x{w}: {coordinator[w]:.2f} s of the {best[w]:.2f} s run, {coordinator[w] / models * 1e3:.1f} ms a"
              f" model; with {w} worker(s) on {default_workers()} cores it has"
              f" {'a core to itself' if w < default_workers() else 'no core to itself'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
