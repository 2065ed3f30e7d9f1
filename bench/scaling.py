"""Farm throughput: the local runner with 1 and 2 processes, and Celery with 2 worker processes.

    .venv/bin/python bench/scaling.py [--size 192] [--every 20] [--repeat 3] [--renderer gl|synthetic]
                                      [--redis redis://127.0.0.1:6379/15]

One run renders the project's sample models (every sequence, a frame every --every ms) the same
way in each mode, into a fresh store each time, and prints:

* frames per second for local x1, local x2 and Celery x2 (the best of --repeat runs of each;
  runs are interleaved so all modes see the same machine load),
* the scaling ratio local x2 / local x1,
* Celery's overhead per frame against the local runner with the same 2 processes:
  (t_celery - t_local2) / frames, and the same with the local pool's start-up taken out of the
  local time, since Celery workers are started once and stay up. Start-up is measured by a job of
  one frame per batch, for 1 and for 2 processes: spawning, imports, GL contexts, and llvmpipe
  compiling the shader and blend variants on first draw (a warm Celery process has done all of that
  already); the scaling is printed with and without it.

Celery runs against a real worker subprocess (`celery -A tasks worker --pool prefork
--concurrency 2`) on the given Redis database, with its own queue; only that queue's keys are
deleted afterwards. ``--renderer synthetic`` swaps the GL renderer for the no-GL stand-in, which
leaves only the farm's own costs (loading, PNG encoding, the store, the broker).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


def write_job(root: Path, size: int, every: int) -> tuple[Path, Path]:
    from renderer.samples import write_samples

    write_samples(root / "models")
    job = root / "bench.toml"
    job.write_text(f'name = "bench"\nsize = "{size}x{size}"\nevery = {every}\n[[models]]\npaths = ["models/*.mdx"]\n')
    # One frame of every batch: what a fresh pool pays before its steady rate (spawning, imports, the GL
    # context, llvmpipe compiling each shader and blend variant the models use on first draw).
    warm = root / "warm.toml"
    warm.write_text(f'name = "warm"\nsize = "{size}x{size}"\ntimestamps = [0]\n[[models]]\npaths = ["models/*.mdx"]\n')
    return job, warm


class Coordinator:
    """Where the coordinator's (this process's) time goes in a run: planning the job, handling the
    results (recording them in the job state, saving it), and the rest (waiting for the workers,
    starting the pool). Measured by wrapping those functions for one run."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def __enter__(self):
        from farm.run import jobs

        # (owner, attribute, what its time counts as): put back as they were on leaving
        self._targets = [(jobs, "expand_manifest", "plan"), (jobs.JobState, "record", "record results"),
                         (jobs.JobState, "save", "save job state")]
        self._saved = [getattr(owner, name) for owner, name, _ in self._targets]
        for (owner, name, label), fn in zip(self._targets, self._saved, strict=True):
            setattr(owner, name, self._timed(label, fn))
        return self

    def _timed(self, label: str, fn):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - t
        return run

    def __exit__(self, *exc):
        for (owner, name, _), fn in zip(self._targets, self._saved, strict=True):
            setattr(owner, name, fn)


def timed_run(manifest: Path, out: Path, coordinator: dict | None = None, **kw) -> tuple[float, int]:
    from farm.run.jobs import run_job

    t0 = time.perf_counter()
    with Coordinator() as c:
        job = run_job(manifest, out=out, progress=False, **kw)
    if coordinator is not None:
        coordinator.clear()
        coordinator.update(c.seconds)
    dt = time.perf_counter() - t0
    c = job.counts()
    if c["failed"] or c["pending"]:
        raise SystemExit(f"bench: {c['failed']} frames failed, {c['pending']} pending in {manifest.name}")
    return dt, c["done"]


class Worker:
    def __init__(self, redis: str, renderer: str, log: Path):
        self.redis = redis
        self.queue = f"farm-bench-{uuid.uuid4().hex[:8]}"
        self.name = f"{self.queue}@{socket.gethostname()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("FARM_") and k != "LP_NUM_THREADS"}
        env.update(FARM_BROKER_URL=redis, FARM_RESULT_BACKEND=redis, FARM_QUEUE=self.queue, FARM_RENDERER=renderer)
        self.log = open(log, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "tasks", "worker", "--pool", "prefork",
                                      "--concurrency", "2", "-n", self.name, "-l", "warning", "--without-mingle",
                                      "--without-gossip"], cwd=ROOT, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        from farm.celery import app

        app.conf.broker_url = app.conf.result_backend = redis
        os.environ["FARM_QUEUE"] = self.queue
        deadline = time.monotonic() + 60
        while not app.control.ping(destination=[self.name], timeout=0.5):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise SystemExit(f"bench: the Celery worker did not start; see {log}")

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.log.close()
        os.environ.pop("FARM_QUEUE", None)
        import redis

        r = redis.Redis.from_url(self.redis)
        r.delete(self.queue, f"_kombu.binding.{self.queue}")
        r.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=192, help="frame width and height (default 192)")
    ap.add_argument("--every", type=int, default=20, help="a frame every N ms of each sequence (default 20)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each mode; the best counts (default 3)")
    ap.add_argument("--renderer", choices=("gl", "synthetic"), default="gl")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/15", help="broker and result backend for Celery")
    args = ap.parse_args()
    os.environ["FARM_RENDERER"] = args.renderer
    os.environ.pop("FARM_BROKER_URL", None)

    tmp = Path(tempfile.mkdtemp(prefix="farm-bench-"))
    job, warm = write_job(tmp, args.size, args.every)
    worker = Worker(args.redis, args.renderer, tmp / "worker.log")
    best: dict[str, float] = {}
    where: dict[str, dict] = {}
    frames = 0
    try:
        timed_run(warm, tmp / "warmup", broker=args.redis)  # the worker's processes are up and warm
        n = 0
        for _ in range(args.repeat):
            for mode, kw in (("local x1", {"broker": "local", "workers": 1}),
                             ("local x2", {"broker": "local", "workers": 2}),
                             ("start x1", {"broker": "local", "workers": 1, "manifest": warm}),
                             ("start x2", {"broker": "local", "workers": 2, "manifest": warm}),
                             ("celery x2", {"broker": args.redis})):
                n += 1
                manifest = kw.pop("manifest", job)
                spent: dict = {}
                dt, done = timed_run(manifest, tmp / f"out{n}", coordinator=spent, **kw)
                if manifest is job:
                    frames = done
                if dt < best.get(mode, float("inf")):
                    best[mode] = dt
                    where[mode] = dict(spent, total=dt)
    finally:
        worker.close()

    print(f"farm bench: {frames} frames of {args.size}x{args.size} (renderer {args.renderer}, sample models, every"
          f" {args.every} ms of every sequence), best of {args.repeat}")
    for mode in ("local x1", "local x2", "celery x2"):
        print(f"  {mode:10s} {best[mode]:7.3f} s  {frames / best[mode]:8.1f} frames/s")
    start = best["start x2"]
    print(f"  (local start-up: x1 {best['start x1']:.3f} s, x2 {start:.3f} s: a job of one frame per batch in a"
          f" fresh pool)")
    scaling = best["local x1"] / best["local x2"]
    print(f"scaling local x2 / x1: {scaling:.2f}x (2 processes, LP_NUM_THREADS=1 each; ideal 2.00 on 2 free cores)")
    warm1, warm2 = best["local x1"] - best["start x1"], best["local x2"] - start
    if warm1 > 0 and warm2 > 0:
        print(f"scaling with each pool's start-up taken out: {warm1 / warm2:.2f}x (what long-lived workers see)")
    over = (best["celery x2"] - best["local x2"]) / frames * 1000
    over_warm = (best["celery x2"] - max(best["local x2"] - start, 1e-9)) / frames * 1000
    print(f"celery overhead per frame vs local x2: {over:+.3f} ms (local start-up included),"
          f" {over_warm:+.3f} ms (local start-up taken out)")
    print(f"celery x2 / local x2 throughput: {best['local x2'] / best['celery x2']:.2f}")
    print("the coordinator's time (this process) in the best run of each mode:")
    for mode in ("local x1", "local x2", "celery x2"):
        w = where[mode]
        own = sum(v for k, v in w.items() if k != "total")
        parts = ", ".join(f"{k} {v:.3f} s" for k, v in sorted(w.items()) if k != "total")
        print(f"  {mode:10s} {parts}; waiting for the workers {w['total'] - own:.3f} s of {w['total']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
