"""Routine events a nightly run must ride out, with a real Redis of our own (a spare port, AOF on,
so it keeps its data across a restart as docker/compose.yaml's does) and real `celery worker`
processes that the tests stop and kill:

- Redis restarts in the middle of `farm run --broker`: the client says it lost the connection,
  reconnects, and the job finishes with every frame (nothing acked as failed, nothing lost);
- a worker is SIGKILLed whole mid-batch: its batch comes back after the visibility timeout and a
  second worker renders it; every frame exactly once.

The renderer is the no-GL stand-in (FARM_RENDERER=synthetic, each frame 150 ms), so the timing
is the farm's, not llvmpipe's. Recovery times are printed (`pytest -s`) for the release notes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REDIS_SERVER

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow,  # Redis servers and Celery workers of its own (make test-fast leaves them out)
              pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")]


def _env(redis_url: str, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FARM_") and k != "LP_NUM_THREADS"}
    env.update(FARM_BROKER_URL=redis_url, FARM_RESULT_BACKEND=redis_url, FARM_QUEUE="faults", FARM_RENDERER="synthetic",
               FARM_SYNTHETIC_DELAY_MS="150", FARM_RETRY_BACKOFF="1", EGL_PLATFORM="surfaceless",
               PYOPENGL_PLATFORM="egl", PYTHONUNBUFFERED="1", **extra)
    return env


def _worker(env: dict, name: str, log: Path, concurrency: int = 1) -> subprocess.Popen:
    with open(log, "ab") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "farm.celery", "worker", "--pool", "prefork", "--concurrency",
             str(concurrency), "-n", f"{name}@%h", "-Q", "faults", "-l", "info", "--without-mingle",
             "--without-gossip"], cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _job(tmp_path: Path, timestamps: str) -> Path:
    from renderer.samples import write_samples

    write_samples(tmp_path / "models")
    manifest = tmp_path / "job.toml"
    manifest.write_text(f'name = "faults"\nsize = "16x16"\ntimestamps = {timestamps}\n'
                        '[[models]]\npaths = ["models/crate.mdx", "models/filter_modes.mdx"]\n')
    return manifest


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _job_file(out: Path) -> dict:
    import json

    files = sorted((out / "jobs").glob("*.json"))
    return json.loads(files[0].read_text()) if files else {}


def _done(out: Path) -> int:
    """Frames done so far, as `farm status` sees them (the job document and its log of changes)."""
    from farm.run.jobs import JobState

    files = sorted((out / "jobs").glob("*.json"))
    try:
        return JobState.load(str(files[0])).counts()["done"] if files else 0
    except (OSError, ValueError, RuntimeError):  # not written yet
        return 0


def test_a_redis_restart_mid_run_loses_nothing(redis_server, tmp_path):
    manifest = _job(tmp_path, "[0, 100, 200, 300, 400, 500, 600, 700, 800, 900]")
    env = _env(redis_server.url, FARM_BROKER_RETRY_S="60")
    worker = _worker(env, "faults-a", tmp_path / "worker.log", concurrency=2)
    out = tmp_path / "out"
    try:
        client = subprocess.Popen([sys.executable, "-m", "farm", "run", str(manifest), "--out", str(out),
                                   "--broker", redis_server.url, "--no-compare", "--no-progress"], cwd=tmp_path,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_for(lambda: _done(out) >= 2 or client.poll() is not None, 90, "no frame rendered before the restart")
        redis_server.stop()
        down = time.monotonic()
        time.sleep(3)
        redis_server.start()
        outs, errs = client.communicate(timeout=180)
        took = time.monotonic() - down
    finally:
        _stop(worker)
    assert client.returncode == 0, (outs, errs, (tmp_path / "worker.log").read_text()[-3000:])
    assert "lost the connection to the broker" in errs and "reconnected to the broker after" in errs, errs
    assert "Traceback" not in errs
    job = _job_file(out)
    statuses = {t["status"] for t in job["traces"].values()}
    assert statuses == {"done"} and len(job["traces"]) >= 20
    digests = [t["digest"] for t in job["traces"].values()]
    assert len(set(digests)) == len(digests)  # every frame once, each its own image
    print(f"\nRedis down 3 s: the job finished {took:.1f} s after Redis stopped")


def test_a_killed_worker_s_batch_comes_back_after_the_visibility_timeout(redis_server, tmp_path):
    manifest = _job(tmp_path, "[0, 100, 200, 300, 400, 500, 600, 700]")
    # Short limits that agree (farm.celery.app): soft 8 s < hard 10 s < visibility 14 s, sweep every 2 s.
    env = _env(redis_server.url, FARM_SOFT_TIME_LIMIT="8", FARM_TIME_LIMIT="10", FARM_VISIBILITY_TIMEOUT="14",
               FARM_RESTORE_INTERVAL="2")
    first = _worker(env, "faults-a", tmp_path / "a.log")
    out = tmp_path / "out"
    second = None
    try:
        client = subprocess.Popen([sys.executable, "-m", "farm", "run", str(manifest), "--out", str(out),
                                   "--broker", redis_server.url, "--no-compare", "--no-progress"], cwd=tmp_path,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The first worker is mid-batch when at least one of its frames is in the store.
        _wait_for(lambda: any((out / "images").rglob("*.png")) if (out / "images").exists() else False, 90,
                  "the first worker rendered nothing")
        os.killpg(first.pid, signal.SIGKILL)  # the whole worker: main process and pool, no goodbye
        first.wait(10)
        killed = time.monotonic()
        second = _worker(env, "faults-b", tmp_path / "b.log")
        outs, errs = client.communicate(timeout=240)
        took = time.monotonic() - killed
    finally:
        _stop(first)
        if second is not None:
            _stop(second)
    assert client.returncode == 0, (outs, errs, (tmp_path / "b.log").read_text()[-3000:])
    job = _job_file(out)
    assert {t["status"] for t in job["traces"].values()} == {"done"} and len(job["traces"]) >= 16
    assert took < 14 + 2 + 60, f"the batch came back only after {took:.1f} s"
    print(f"\nworker SIGKILLed mid-batch: the job finished {took:.1f} s later (visibility timeout 14 s)")
