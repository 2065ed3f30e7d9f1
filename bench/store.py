"""What the S3 store costs against the folder store (issue 33 item 3): the same job into a folder and
into a bucket, measured in the same run, with an instant renderer so only the farm's own costs remain.

    .venv/bin/python bench/store.py [--frames 1008] [--workers 2] [--batch 48] [--rounds 3]

Starts moto_server on loopback (an S3-protocol server; on loopback a request costs far less than at
a real object store, so the request count is the figure that carries over), writes a manifest over
the sample models with as many timestamps as make about --frames frames, and runs `farm run` (with
its compare step: there are no goldens, so it words the hint) into a folder store and into the
bucket, alternately, --rounds times each, every time a fresh job id into an emptied store. The
renderer is `FARM_RENDERER=store:instant` (this file's `instant`: a fixed 8x8 frame whose trace
names the frame, so every PNG is distinct as real frames are).

Printed: the median seconds and frames/s of each store, S3's ratio to the folder store's frames/s,
the CPU seconds of the farm's processes and of moto_server, and the requests the S3 run sent per
frame (counted from moto_server's request log, by method and by object: image, batch result, ...).
Every run's frames must be the folder store's (the index of trace key -> image digest).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from travel import BUCKET, start_moto  # the moto_server the travel bench starts (bench/ is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
_PIXELS = np.full((8, 8, 4), (40, 90, 160, 255), np.uint8)


class _Instant:
    """A renderer that draws nothing: a fixed 8x8 frame whose trace says which frame it is."""

    def gl_info(self) -> dict:
        return {"renderer": "instant", "version": "instant-1"}

    def render(self, model, spec, model_digest: str | None = None):
        from renderer.frame import Frame

        trace = {"renderer_version": "instant-1", "model": str(getattr(model, "name", "")), "model_hash": model_digest,
                 "sequence_index": spec.sequence, "time_ms": int(spec.time_ms), "size": [8, 8], "gl": self.gl_info()}
        return Frame(_PIXELS, trace, [])

    def forget(self, model) -> None:
        pass

    def close(self) -> None:
        pass


def instant() -> _Instant:
    return _Instant()


def _moto(tmp: Path) -> tuple[subprocess.Popen, dict, Path]:
    log = tmp / "moto.log"
    proc, env = start_moto(tmp, stderr=log.open("wb"), FARM_RENDERER="store:instant",
                           PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'bench'}")
    return proc, env, log


def _manifest(tmp: Path, frames: int) -> Path:
    sys.path.insert(0, str(ROOT))
    from renderer.samples import write_samples

    models = write_samples(tmp / "samples")
    stamps = list(range(0, 10 * max(1, frames // len(models)), 10))
    m = tmp / "store.toml"
    m.write_text(f'name = "store"\nsize = "8x8"\ntimestamps = {json.dumps(stamps)}\n'
                 f'[[models]]\npaths = {json.dumps([str(p) for p in models])}\n')
    return m


def _cpu(pid: int) -> float:
    """CPU seconds a process has used (user + system, /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(env: dict, manifest: Path, out: str, job: str, workers: int, batch: int) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "farm", "run", str(manifest), "--out", out, "--job-id", job,
                        "--workers", str(workers), "--no-progress"], cwd=manifest.parent,
                       env={**{k: v for k, v in env.items() if not k.startswith("_")}, "FARM_BATCH_FRAMES": str(batch)},
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(r.stdout + r.stderr)
    return time.perf_counter() - t


_KINDS = (("images/", "image"), ("/batches/", "batch result"), ("/attempts/", "delivery"), ("/log/", "job log"),
          ("inputs/", "input"), ("/index.json", "index"), ("jobs/", "job"))


def _requests(log: Path, start: int) -> collections.Counter:
    """Requests moto answered since byte `start` of its log, by (method, what the object is)."""
    with log.open("rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    return collections.Counter((m, "list" if "?list" in path else "delete" if "?delete" in path
                                else next((k for s, k in _KINDS if s in path), "other"))
                               for m, path in re.findall(r'"(GET|PUT|POST|HEAD|DELETE) (\S+)', text))


def _clear(env: dict, prefix: str) -> None:
    client = env["_client"]
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{prefix}/")
    keys = [o["Key"] for p in pages for o in p.get("Contents", ())]
    for i in range(0, len(keys), 1000):
        client.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=1008)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=48, help="FARM_BATCH_FRAMES (default 48)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    folder_s, s3_s, counts, cpu = [], [], [], collections.defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="farm-store-bench-") as tmp:
        tmp = Path(tmp)
        proc, env, log = _moto(tmp)
        try:
            manifest = _manifest(tmp, args.frames)
            for i in range(args.rounds):
                out = tmp / f"folder-{i}"
                c0 = _children_cpu()
                folder_s.append(_run(env, manifest, str(out), "ref", args.workers, args.batch))
                cpu["folder"].append(_children_cpu() - c0)
                ref = json.loads((out / "jobs" / "ref" / "index.json").read_text())
                _clear(env, "run")
                start, c0, m0 = log.stat().st_size, _children_cpu(), _cpu(proc.pid)
                s3_s.append(_run(env, manifest, f"s3://{BUCKET}/run", f"s3-{i}", args.workers, args.batch))
                cpu["s3"].append(_children_cpu() - c0)
                cpu["moto"].append(_cpu(proc.pid) - m0)
                time.sleep(0.5)  # the log's last lines
                counts.append(_requests(log, start))
                got = json.loads(env["_client"].get_object(Bucket=BUCKET, Key=f"run/jobs/s3-{i}/index.json")["Body"]
                                 .read())
                assert got == ref, "the S3 run's frames differ from the folder store's"
        finally:
            proc.kill()
    frames = len(ref)
    folder, s3 = statistics.median(folder_s), statistics.median(s3_s)
    total = statistics.median(sum(c.values()) for c in counts)
    methods = {m: statistics.median(sum(n for (m2, _), n in c.items() if m2 == m) for c in counts)
               for m in ("PUT", "GET", "HEAD", "POST", "DELETE")}
    kinds = sorted({mk for c in counts for mk in c}, key=lambda mk: -statistics.median(c[mk] for c in counts))
    print(f"{frames} frames, {args.batch}-frame batches, {args.workers} local processes, instant renderer,"
          f" median of {args.rounds}")
    c = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"  folder store  {folder:6.2f} s  {frames / folder:7.1f} frames/s  farm CPU {c['folder']:.1f} s")
    print(f"  S3 (moto)     {s3:6.2f} s  {frames / s3:7.1f} frames/s  {folder / s3:4.2f}x the folder store's frames/s,"
          f"  farm CPU {c['s3']:.1f} s, moto_server CPU {c['moto']:.1f} s")
    print(f"  S3 requests   {total:.0f} ({total / frames:.2f} a frame): "
          + ", ".join(f"{m} {n / frames:.2f}" for m, n in methods.items() if n))
    print("  by object      " + ", ".join(f"{m} {k} {statistics.median(c[m, k] for c in counts) / frames:.3f}"
                                          for m, k in kinds))


if __name__ == "__main__":
    main()
