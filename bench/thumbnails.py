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

With --instant N, the farm's own cost of one-frame thumbnails instead: N copies of the smallest
sample model, drawn by an instant renderer (FARM_RENDERER=thumbnails:instant, this file's
`instant`: a fixed 8x8 frame, so only loading, batching, encoding, transport and the coordinator's
writes remain), locally with 2 processes (models/s, the coordinator's CPU ms a model) and, with
--broker redis://HOST:PORT/DB (a Redis of your own: its INFO commandstats are read before and
after), through a `celery worker` of 2 processes started here (models/s, Redis commands a model).
Each is run twice in the same session: grouped (envelopes, as `farm thumbnails` sends them) and one
model a delivery (the baseline), and their ratio printed. Locally, the pool processes' CPU a model
too (reaped after each run: RUSAGE_CHILDREN, their start-up included). --grouped-only: the grouped
local run alone, with this process's peak RSS (a large N: whether a model's cost grows with N).

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


def instant():
    """FARM_RENDERER=thumbnails:instant (bench/ on PYTHONPATH): a renderer that returns one fixed 8x8
    frame at once, so a run measures the farm's own costs."""
    import numpy as np

    from renderer.frame import Frame

    rgba = np.zeros((8, 8, 4), np.uint8)
    rgba[2:6, 2:6] = (200, 120, 40, 255)

    class Instant:
        def gl_info(self) -> dict:
            return {"renderer": "instant"}

        def render(self, model, spec, model_digest=None):
            return Frame(rgba.copy(), {"renderer_version": "instant-1", "model_hash": model_digest,
                                       "time_ms": int(spec.time_ms), "size": [8, 8]}, [])

        def forget(self, model) -> None:
            pass

        def close(self) -> None:
            pass

    return Instant()


def _redis_commands(url: str) -> int:
    """The total of INFO commandstats' calls on the Redis at `url` (a RESP exchange, no client library)."""
    import socket
    from urllib.parse import urlparse

    u = urlparse(url)
    with socket.create_connection((u.hostname or "localhost", u.port or 6379), timeout=5) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
        data = b""
        while not data.endswith(b"\r\n") or data.count(b"\r\n") < 2 or len(data) < int(data[1:data.index(b"\r\n")]):
            data += s.recv(65536)
    return sum(int(part.split(b"calls=")[1].split(b",")[0]) for part in data.split(b"\r\n") if b"calls=" in part)


def _one_model_a_delivery(on: bool) -> None:
    """Send one model a delivery (as before envelopes: farm.plan.envelopes) while `on`; the baseline
    each run measures beside the grouped one."""
    from farm.thumbs import run as thumbs_run

    real = getattr(thumbs_run, "_bench_real_run_batches", thumbs_run.run_batches)
    thumbs_run._bench_real_run_batches = real
    thumbs_run.run_batches = (lambda *a, **kw: real(*a, **{**kw, "group": False})) if on else real


def _instant_tree(tmp: Path, n: int) -> tuple[Path, Path]:
    from renderer.samples import write_samples

    write_samples(tmp / "samples")
    small = min((tmp / "samples").glob("*.mdx"), key=lambda p: p.stat().st_size)
    tree = tmp / "tree"
    for i in range(n):
        d = tree / f"d{i // 1000:03d}"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy(small, d / f"m{i:06d}.mdx")
    return tree, small


def _celery_worker(env: dict, broker: str, tmp: Path):
    import subprocess
    import uuid

    queue = f"bench-thumbs-{uuid.uuid4().hex[:8]}"
    wenv = {**env, "FARM_BROKER_URL": broker, "FARM_RESULT_BACKEND": broker, "FARM_QUEUE": queue}
    os.environ.update(FARM_QUEUE=queue, FARM_RESULT_BACKEND=broker)
    return subprocess.Popen([sys.executable, "-m", "celery", "-A", "farm.celery", "worker", "--pool", "prefork",
                             "--concurrency", "2", "-n", f"{queue}@%h", "-Q", queue, "-l", "warning",
                             "--without-mingle", "--without-gossip"], env=wenv, cwd=str(tmp),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def instant_runs(args) -> None:
    import multiprocessing
    import resource

    env = {**os.environ, "FARM_RENDERER": "thumbnails:instant",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    os.environ.update({k: env[k] for k in ("FARM_RENDERER", "PYTHONPATH")})
    sys.path.insert(0, str(ROOT / "bench"))
    from farm.thumbs import ThumbnailOptions, make_thumbnails

    with tempfile.TemporaryDirectory(prefix="bench-instant-") as tmp:
        tmp = Path(tmp)
        tree, small = _instant_tree(tmp, args.instant)
        opts = ThumbnailOptions(size=8, sheet=0, render=ThumbnailOptions().render.replace(msaa=1))
        figures: dict[tuple[str, str], tuple[float, float, float | None]] = {}
        workers_ms: dict[str, float] = {}  # local runs: the pool processes' CPU ms a model

        def run(broker: str, mode: str) -> None:
            _one_model_a_delivery(mode == "one a delivery")
            before = _redis_commands(args.broker) if broker != "local" else None
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            s = make_thumbnails([tree], tmp / f"{broker != 'local'}-{mode}", opts, broker=broker, workers=2,
                                progress=False)
            dt = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            _one_model_a_delivery(False)
            assert s.models == args.instant and not s.failed, s.text()
            cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
            used = _redis_commands(args.broker) - before if before is not None else None
            figures[broker, mode] = (s.models / dt, cpu / s.models * 1e3, None if used is None else used / s.models)
            if broker == "local":  # the pool's processes exit on their own after the run: reaped here, counted
                for p in multiprocessing.active_children():
                    p.join(60)
                c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                workers_ms[mode] = ((c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)) / s.models * 1e3

        def show(label: str, broker: str) -> None:
            grouped, single = figures[broker, "grouped"], figures[broker, "one a delivery"]
            for mode, (rate, ms, cmds) in (("grouped", grouped), ("one a delivery", single)):
                extra = "" if cmds is None else f"; {cmds:.1f} Redis commands a model"
                if mode in workers_ms and broker == "local":
                    extra += f"; workers' CPU {workers_ms[mode]:.3f} ms a model (2 processes, start-up included)"
                print(f"  {label}, {mode}: {rate:.0f} models/s; coordinator CPU {ms:.3f} ms a model{extra}")
            extra = "" if grouped[2] is None else f", Redis commands {single[2] / grouped[2]:.1f}x fewer"
            print(f"  {label}, grouped / one a delivery: {grouped[0] / single[0]:.2f}x models/s, coordinator CPU"
                  f" {single[1] / grouped[1]:.2f}x less a model{extra}")

        print(f"instant renderer, {args.instant} one-frame models ({small.name}), 2 processes; grouped"
              f" (envelopes of FARM_BATCH_FRAMES) and one model a delivery, measured in this run:")
        modes = ("grouped",) if args.grouped_only else ("grouped", "one a delivery")
        for mode in modes:
            run("local", mode)
        if args.grouped_only:
            rate, ms, _ = figures["local", "grouped"]
            print(f"  local, grouped: {rate:.0f} models/s; coordinator CPU {ms:.3f} ms a model; workers' CPU"
                  f" {workers_ms['grouped']:.3f} ms a model (2 processes, start-up included); coordinator peak RSS"
                  f" {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
            return
        show("local", "local")
        if not args.broker:
            return
        worker = _celery_worker(env, args.broker, tmp)
        try:
            make_thumbnails([small], tmp / "warm", opts, broker=args.broker, progress=False)  # the worker is up
            for mode in ("grouped", "one a delivery"):
                run(args.broker, mode)
        finally:
            worker.terminate()
            worker.wait(30)
        show("celery", args.broker)


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
    ap.add_argument("--instant", type=int, default=0, metavar="N",
                    help="N one-frame models with the instant renderer: the farm's own cost only")
    ap.add_argument("--broker", help="with --instant: also through Celery on this Redis (redis://HOST:PORT/DB)")
    ap.add_argument("--grouped-only", action="store_true",
                    help="with --instant: only the grouped local run (a large N: the per-model cost at scale)")
    args = ap.parse_args()
    if args.instant:
        instant_runs(args)
        return 0
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
