"""What travelling inputs cost (issue 26): a job into an S3 bucket whose inputs travel, against the
same job into a folder store whose inputs stay at their paths, measured in the same run.

    .venv/bin/python bench/travel.py [--models 24] [--size 128] [--workers 2]

Starts moto_server on loopback (an S3-protocol server: on loopback its latency is far below a real
object store's, so the figures are what the farm itself costs), writes a manifest over the sample
models and up to --models corpus models (../shared/corpus, with the folders their textures are in),
and runs it four times, each with a local pool of --workers processes and a fresh job id:

1. folder store, inputs shared (the files at their paths): the reference frames per second;
2. S3 store, inputs shared (the S3 store's own cost, without travelling inputs);
3. S3 store, inputs travel, an empty worker input cache (the first night);
4. S3 store again, the cache kept (the second night: inputs already in the bucket and on the worker).

Before each S3 run the bucket is emptied but for the inputs: moto lists a prefix by scanning every
key of the bucket, so a fuller bucket would make later runs slower for moto's sake alone.

Printed: seconds and frames/s of each, the ratios against 1, what publishing cost (models resolved,
inputs, bytes offered, new bytes in the bucket, seconds), and the worker cache's hit rate on the
second night (inputs it already held / inputs it used, from the cache's files). Every run's frames
must be byte for byte the reference's (the index of trace key -> image digest).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
BUCKET = "bench"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto(tmp: Path, stderr=subprocess.DEVNULL, **extra: str) -> tuple[subprocess.Popen, dict]:
    """moto_server on a free loopback port with the bench bucket made, and the environment (AWS_* for
    it, no FARM_*/AWS_* of the caller's, `extra` added) that a farm command reaching it runs with;
    env["_client"] is a boto3 client of it. bench/store.py starts its server here too."""
    port = _free_port()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=stderr)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FARM_", "AWS_"))}
    env.update(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=str(tmp / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp / "none"), **extra)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("moto_server did not start") from None
            time.sleep(0.1)
    import boto3

    client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id="bench",
                          aws_secret_access_key="bench", region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    return proc, env | {"_client": client}


def _manifest(tmp: Path, count: int, size: int) -> Path:
    sys.path.insert(0, str(ROOT))
    from renderer.samples import write_samples

    write_samples(tmp / "samples")
    corpus = sorted(p for p in CORPUS.rglob("*.mdx") if "__" in str(p))[:count] if CORPUS.is_dir() else []
    paths = [str(tmp / "samples" / "*.mdx"), *map(str, corpus)]
    m = tmp / "travel.toml"
    m.write_text(f'name = "travel"\nsize = "{size}x{size}"\ntimestamps = [0, "50%"]\n'
                 f'[[models]]\npaths = {json.dumps(paths)}\n')
    return m


def _run(env: dict, manifest: Path, out: str, job: str, workers: int, **extra) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "farm", "run", str(manifest), "--out", out, "--job-id", job,
                        "--workers", str(workers), "--no-compare", "--no-progress"], cwd=manifest.parent,
                       env={**{k: v for k, v in env.items() if not k.startswith("_")}, "PYTHONPATH": str(ROOT),
                            **extra},
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(r.stdout + r.stderr)
    return time.perf_counter() - t


def _job(env: dict, prefix: str, job: str) -> dict:
    return json.loads(env["_client"].get_object(Bucket=BUCKET, Key=f"{prefix}/jobs/{job}.json")["Body"].read())


def _index(env: dict, prefix: str, job: str) -> dict:
    return json.loads(env["_client"].get_object(Bucket=BUCKET, Key=f"{prefix}/jobs/{job}/index.json")["Body"].read())


def _input_bytes(env: dict, prefix: str) -> int:
    pages = env["_client"].get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{prefix}/inputs/")
    return sum(o["Size"] for p in pages for o in p.get("Contents", ()))


def _clear_but_inputs(env: dict, prefix: str) -> None:
    """Delete the bucket's objects but the travelling inputs: moto lists a prefix by scanning every key
    of the bucket, so each run starts from the same objects (a real S3 lists by prefix)."""
    client = env["_client"]
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{prefix}/")
    keys = [o["Key"] for p in pages for o in p.get("Contents", ()) if not o["Key"].startswith(f"{prefix}/inputs/")]
    for i in range(0, len(keys), 1000):
        client.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]]})


def _cache_files(cache: Path) -> dict[str, int]:
    return {f.name: f.stat().st_mtime_ns for f in cache.glob("??/*")}


def _s3_run(env: dict, manifest: Path, job: str, workers: int, **extra) -> tuple[float, dict]:
    _clear_but_inputs(env, "night")
    seconds = _run(env, manifest, f"s3://{BUCKET}/night", job, workers, **extra)
    return seconds, _index(env, "night", job)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=24, help="corpus models besides the samples (default 24)")
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="farm-travel-") as tmp:
        tmp = Path(tmp)
        proc, env = start_moto(tmp, EGL_PLATFORM="surfaceless", PYOPENGL_PLATFORM="egl")
        try:
            manifest = _manifest(tmp, args.models, args.size)
            cache = tmp / "worker-cache"
            travel = {"FARM_INPUT_CACHE": str(cache), "FARM_INPUTS": "travel"}
            folder = _run(env, manifest, str(tmp / "folder-out"), "ref", args.workers)
            ref = json.loads((tmp / "folder-out" / "jobs" / "ref" / "index.json").read_text())
            shared, shared_index = _s3_run(env, manifest, "shared", args.workers, FARM_INPUTS="shared")
            first, first_index = _s3_run(env, manifest, "night1", args.workers, **travel)
            uploaded = _input_bytes(env, "night")
            cost1 = _job(env, "night", "night1")["runs"][-1]["inputs"]
            before = _cache_files(cache)
            second, second_index = _s3_run(env, manifest, "night2", args.workers, **travel)
            cost2 = _job(env, "night", "night2")["runs"][-1]["inputs"]
            after = _cache_files(cache)
            for job, index in (("shared", shared_index), ("night1", first_index), ("night2", second_index)):
                assert index == ref, f"{job}: frames differ from the folder store's"
            frames = len(ref)
            used = {n for n, t in after.items() if t != before.get(n)} | (set(after) - set(before))
            hits = len([n for n in used if n in before])
            new2 = _input_bytes(env, "night") - uploaded
        finally:
            proc.kill()
    print(f"{frames} frames ({len(set(ref.values()))} distinct images), {args.workers} local processes, {args.size}px")
    rows = [("folder store, inputs shared", folder), ("S3, inputs travel, 1st night", first),
            ("S3, inputs travel, 2nd night", second), ("S3, inputs shared", shared)]
    for label, secs in rows:
        print(f"  {label:<30} {secs:6.2f} s  {frames / secs:6.1f} frames/s  {folder / secs:4.2f}x the folder store")
    for label, cost, new in (("1st night", cost1, uploaded), ("2nd night", cost2, new2)):
        print(f"  publish, {label}: {cost['models']} models, {cost['inputs']} inputs, {cost['bytes'] / 1e6:.2f} MB"
              f" offered, {new / 1e6:.2f} MB new in the bucket, {cost['seconds']:.2f} s")
    print(f"  worker cache, 2nd night: {hits} of {len(used)} inputs already held"
          f" ({100 * hits / max(1, len(used)):.0f}% hits)")


if __name__ == "__main__":
    main()
