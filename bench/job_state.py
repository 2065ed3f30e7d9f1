"""Bytes the coordinator writes for a job's state, for a job of ~16,000 cheap frames (issue 23, item 10).

    .venv/bin/python bench/job_state.py [--copies 8] [--every 5] [--fps 300]

The job is planned for real (`--copies` copies of the sample models, a frame every `--every` ms of
each sequence: 8 x 5 ms gives 16,048 frames) and run by the real coordinator (`farm.run.jobs.run_job`:
the job document, every batch result recorded, the end of the run) into a real folder store; only the
workers are simulated: each batch's result comes back at once, as if `--fps` frames a second were
rendered (a simulated clock the coordinator reads, so a run of 16,000 frames at 300 frames/s lasts
53 "seconds" and takes about one). No worker writes anything, so every byte this process writes is the
coordinator's (measured as the `wchar` of /proc/self/io around the run).

It prints those bytes, and next to them what modelfarm 0.2 wrote for the same job, measured in the
same run on a second store: the whole job document and its index at the start, when the batches
are sent, at most once a second as results come in, and at the end (its `JobState.save`).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from farm.run import jobs  # noqa: E402
from farm.run.execute import BatchResult, FrameResult  # noqa: E402


def written() -> int:
    """Bytes this process has passed to write() and its kin so far."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise SystemExit("bench: /proc/self/io has no wchar line")


def write_manifest(root: Path, copies: int, every: int) -> Path:
    from renderer.samples import write_samples

    for i in range(copies):
        write_samples(root / "models" / f"copy{i}")
    m = root / "job.toml"
    m.write_text(f'name = "bench"\nsize = "64x64"\nevery = {every}\n[[models]]\npaths = ["models/*/*.mdx"]\n')
    return m


class Simulated:
    """The workers and the clock: `run_batches` hands back each batch's result after the simulated time
    its frames take; `monotonic` is that clock (the coordinator's only clock)."""

    def __init__(self, fps: float, old_way=None):
        self.now = 0.0
        self.fps = fps
        self.old_way = old_way
        self.results = 0

    def monotonic(self) -> float:
        return self.now

    def run_batches(self, job_id, batches, store, *, on_result, **kw) -> None:
        for b in batches:
            self.now += len(b.keys) / self.fps
            frames = [FrameResult(k, t, "done", digest=hashlib.sha256(k.encode()).hexdigest(), render_s=0.004)
                      for t, k in zip(b.times, b.keys, strict=True)]
            on_result(BatchResult(b.id, frames))
            self.results += 1


class OldWay:
    """What 0.2's `JobState.save` wrote: the whole document and the index, forced at the start,
    after sending the batches and at the end, and at most once a (simulated) second in between."""

    def __init__(self, store, clock: Simulated):
        self.store = store
        self.clock = clock
        self.saved = 0.0  # its forced saves at the start happen at simulated time 0
        self.bytes = 0
        self.writes = 0

    def save(self, job, force: bool = False) -> None:
        now = self.clock.monotonic()
        if not force and now - self.saved < 1.0:
            return
        index = {k: t["digest"] for k, t in sorted(job.traces.items()) if t["status"] == "done"}
        before = written()
        self.store.write_job(job.id, job.data)
        self.store.write_index(job.id, index)
        self.bytes += written() - before
        self.writes += 1
        self.saved = now


def run(manifest: Path, out: Path, fps: float, old_out: Path | None) -> tuple[int, dict, OldWay | None]:
    from farm.store import open_store

    clock = Simulated(fps)
    old = OldWay(open_store(old_out), clock) if old_out else None
    saved_rb, saved_time, saved_record = jobs.run_batches, jobs.time, jobs.JobState.record
    jobs.run_batches = clock.run_batches
    jobs.time = types.SimpleNamespace(monotonic=clock.monotonic)

    def record(self, result):  # the reference's saves happen outside the measured bytes
        n = written()
        saved_record(self, result)
        spent[0] += written() - n
        if old is not None:
            old.save(self)

    spent = [0]
    jobs.JobState.record = record
    try:
        before = written()
        job = jobs.run_job(manifest, out=out, broker="local", progress=False)
        total = written() - before - (old.bytes if old else 0)
    finally:
        jobs.run_batches, jobs.time, jobs.JobState.record = saved_rb, saved_time, saved_record
    if old is not None:  # the forced saves: after planning, after sending the batches, at the end
        old.save(job, force=True)
        old.save(job, force=True)
        old.save(job, force=True)
    info = {"frames": len(job.traces), "batches": len(job.batches), "results": clock.results,
            "seconds": clock.now, "document": len(Path(job.store.job_location(job.id)).read_bytes()),
            "recording": spent[0], "done": job.counts()["done"]}
    return total, info, old


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=8, help="copies of the sample models (default 8)")
    ap.add_argument("--every", type=int, default=5, help="a frame every N ms of each sequence (default 5)")
    ap.add_argument("--fps", type=float, default=300.0, help="simulated frames per second (default 300)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="farm-bench-state-"))
    manifest = write_manifest(tmp, args.copies, args.every)
    t0 = time.perf_counter()
    now, info, old = run(manifest, tmp / "out", args.fps, tmp / "old")
    dt = time.perf_counter() - t0
    mb = 1e6
    print(f"job state bench: {info['frames']:,} frames in {info['batches']} batches, {info['results']} results over"
          f" {info['seconds']:.0f} simulated s at {args.fps:g} frames/s; final document {info['document'] / mb:.2f} MB"
          f" ({dt:.1f} s wall)")
    print(f"  now:        {now / mb:8.2f} MB written by the coordinator for job state"
          f" ({info['recording'] / mb:.2f} MB of it recording results, {info['recording'] / info['frames']:.0f}"
          f" B a frame)")
    print(f"  0.2 (same run): {old.bytes / mb:8.2f} MB ({old.writes} whole-document saves)")
    print(f"  ratio 0.2 / now: {old.bytes / max(now, 1):.1f}x")
    if info["done"] != info["frames"]:
        raise SystemExit(f"bench: {info['frames'] - info['done']} frames not recorded as done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
