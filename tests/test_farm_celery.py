"""Celery on a real Redis with a real `celery -A tasks worker --pool prefork --concurrency 2`:
a job completes with every frame exactly once and byte-identical to the local runner, a pool
process killed mid-batch loses nothing, a model that breaks the loader fails only its own frames.

Redis: the tests' shared one (conftest.REDIS_PORT, MODELFARM_REDIS_PORT; started by scripts/ensure-redis.sh when
absent), database 15.
Each session uses its own queue and worker name, and deletes only its own keys.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from conftest import REDIS_PORT, ROOT, redis_up, redis_url  # noqa: E402

from farm.celery.app import app, config_from_env  # noqa: E402
from farm.plan.keys import parse_key  # noqa: E402
from farm.run.jobs import JobState, retry_job, run_job  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

REDIS = redis_url(15)
BROKEN_MDX = b"MDLXVERS\x04\x00\x00\x00\x20\x03\x00\x00GEOS\xe8\x03\x00\x00" + bytes(8)

pytestmark = pytest.mark.slow  # real Celery workers (make test-fast leaves them out)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    pytest.importorskip("renderer.anim", reason="renderer.anim (animation) has not landed yet")
    if not redis_up():
        subprocess.run(["bash", str(ROOT / "scripts" / "ensure-redis.sh")], capture_output=True, timeout=30)
    if not redis_up():
        pytest.skip(f"no Redis on 127.0.0.1:{REDIS_PORT} and scripts/ensure-redis.sh could not start one")
    tag = uuid.uuid4().hex[:8]
    queue, name = f"farm-test-{tag}", f"farmtest-{tag}@{socket.gethostname()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FARM_") and k != "LP_NUM_THREADS"}
    env.update(FARM_BROKER_URL=REDIS, FARM_RESULT_BACKEND=REDIS, FARM_QUEUE=queue, FARM_SOFT_TIME_LIMIT="120",
               FARM_TIME_LIMIT="180", FARM_RETRY_BACKOFF="1")
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tasks", "worker", "--pool", "prefork", "--concurrency", "2",
             "-n", name, "-l", "info", "--without-mingle", "--without-gossip"],
            cwd=ROOT, env=env, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    app.conf.broker_url = app.conf.result_backend = REDIS
    try:
        deadline = time.monotonic() + 60
        while not app.control.ping(destination=[name], timeout=0.5):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the worker did not answer ping:\n{log.read_text()[-3000:]}")
        os.environ["FARM_QUEUE"] = queue
        yield {"proc": proc, "name": name, "queue": queue, "log": log}
    finally:
        os.environ.pop("FARM_QUEUE", None)
        proc.send_signal(signal.SIGTERM)  # warm shutdown
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        import redis

        r = redis.Redis.from_url(REDIS)
        r.delete(queue, f"_kombu.binding.{queue}")
        r.close()


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("celery-job")
    write_samples(root / "models")
    (root / "models" / "broken.mdx").write_bytes(BROKEN_MDX)
    (root / "job.toml").write_text('name = "celery"\nsize = "64x64"\ntimestamps = [0, "50%", "100%"]\n'
                                   '[[models]]\npaths = ["models/*.mdx"]\n')
    return root


@pytest.fixture(scope="module")
def both_runs(worker, samples):
    """The same manifest through Celery and through the local runner."""
    remote = run_job(samples / "job.toml", out=samples / "celery", broker=REDIS, progress=False)
    local = run_job(samples / "job.toml", out=samples / "local", workers=2, broker="local", progress=False)
    return remote, local


def every_frame_once(job: JobState, size: int = 64) -> None:
    from renderer.png import read_png

    store = job.store
    done = {k: t["digest"] for k, t in job.traces.items() if t["status"] == "done"}
    assert store.read_index(job.id) == dict(sorted(done.items()))
    assert len(set(done.values())) == len(done)
    assert sorted(p.stem for p in store.images()) == sorted(done.values())  # nothing extra, nothing missing
    for key, digest in done.items():
        rgba, trace = read_png(store.image_path(digest))
        assert rgba.shape == (size, size, 4) and trace["time_ms"] == job.traces[key]["time_ms"]
        assert parse_key(key).time_ms in (trace["time_ms"], None)  # None: a fraction ("50%"), the ms is the trace's


def test_job_completes_exactly_once_and_matches_the_local_runner(both_runs):
    remote, local = both_runs
    assert remote.counts()["pending"] == 0 and remote.counts()["done"] >= 18
    every_frame_once(remote)
    every_frame_once(local)
    assert remote.index() == local.index()  # same keys, same sha256 of the PNG bytes
    key = sorted(remote.index())[0]
    assert remote.store.read_image(remote.index()[key]) == local.store.read_image(local.index()[key])
    assert remote.data["runs"][0]["mode"] == "celery" and local.data["runs"][0]["mode"] == "local"


def test_a_model_that_breaks_the_loader_fails_only_its_frames(both_runs):
    remote, local = both_runs
    failed = remote.keys("failed")
    assert failed == ["models/broken.mdx|-|0ms|auto|64x64|msaa0|team0|transparent"]
    error = remote.traces[failed[0]]["error"]
    assert "broken.mdx: chunk GEOS at byte 20: chunk size 1000 runs past the end of the file" in error
    assert {k: local.traces[k]["error"] for k in local.keys("failed")} == {failed[0]: error}
    assert all(not k.startswith("models/broken.mdx") for k in remote.keys("done"))


def test_retry_over_celery_plans_the_fixed_model_again(worker, samples, both_runs, tmp_path):
    remote, _ = both_runs
    shutil.copy(samples / "models" / "crate.mdx", samples / "models" / "broken.mdx")
    try:
        job = retry_job(remote.id, out=samples / "celery", failed=True, broker=REDIS, progress=False)
    finally:
        (samples / "models" / "broken.mdx").write_bytes(BROKEN_MDX)
    assert job.counts()["failed"] == 0 and job.counts()["pending"] == 0
    assert {k.split("|")[1] for k in job.traces if k.startswith("models/broken.mdx|")} == {"Stand", "Spin", "Death"}
    every_frame_once(job)


def pool_children(pid: int) -> set[int]:
    out = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        out.update(int(c) for c in (task / "children").read_text().split())
    return out


def test_killing_a_pool_process_mid_batch_loses_nothing(worker, samples, monkeypatch):
    from celery.result import AsyncResult

    monkeypatch.setenv("FARM_BATCH_FRAMES", "1000")  # one long batch, to kill its process in the middle
    (samples / "slow.toml").write_text('name = "slow"\nsize = "128x128"\nsequences = ["Stand"]\nevery = 5\n'
                                       '[[models]]\npath = "models/crate.mdx"\n')
    outcome: dict = {}

    def run():
        try:
            outcome["job"] = run_job(samples / "slow.toml", out=samples / "slow", broker=REDIS, progress=False)
        except BaseException as e:  # noqa: BLE001 - reported below
            outcome["error"] = e

    t = threading.Thread(target=run)
    t.start()
    killed = None
    deadline = time.monotonic() + 60
    while killed is None and time.monotonic() < deadline and t.is_alive():
        for task in (app.control.inspect(destination=[worker["name"]], timeout=0.5).active() or {}).get(
                worker["name"], []):
            info = AsyncResult(task["id"], app=app).info
            if isinstance(info, dict) and 20 <= info.get("done", 0) < info.get("total", 0) - 50:
                assert info["pid"] == task["worker_pid"] in pool_children(worker["proc"].pid)
                os.kill(task["worker_pid"], signal.SIGKILL)
                killed = (task["worker_pid"], info["done"], info["total"])
                break
        time.sleep(0.05)
    t.join(120)
    assert not t.is_alive() and "error" not in outcome, outcome
    assert killed is not None, "no batch was caught in the middle"
    job = outcome["job"]
    assert job.counts() == {"total": 401, "done": 401, "failed": 0, "pending": 0}
    every_frame_once(job, size=128)
    (batch_id,) = job.batches
    assert job.store.deliveries(job.id, batch_id) == 2  # delivered again, once
    assert worker["proc"].poll() is None and killed[0] not in pool_children(worker["proc"].pid)
    assert "WorkerLostError" in worker["log"].read_text() or "SIGKILL" in worker["log"].read_text()


def test_other_pools_are_refused():
    env = {**os.environ, "FARM_BROKER_URL": REDIS, "FARM_QUEUE": f"farm-refused-{uuid.uuid4().hex[:6]}"}
    p = subprocess.run([sys.executable, "-m", "celery", "-A", "tasks", "worker", "--pool", "threads", "-n",
                        f"refused-{uuid.uuid4().hex[:6]}@%h"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode != 0 and "need the prefork pool" in p.stderr


def test_config_from_env():
    c = config_from_env({"FARM_BROKER_URL": "redis://h:1/2", "FARM_TIME_LIMIT": "100", "FARM_SOFT_TIME_LIMIT": "50",
                         "FARM_MAX_TASKS_PER_CHILD": "7", "FARM_MAX_MEMORY_PER_CHILD": "1000"})
    assert c["result_backend"] == "redis://h:1/2" and c["task_default_queue"] == "farm"
    assert c["task_acks_late"] and c["task_reject_on_worker_lost"] and c["worker_prefetch_multiplier"] == 1
    assert (c["task_soft_time_limit"], c["task_time_limit"]) == (50, 100)
    # Defaults that agree (farm.celery.app): visibility = hard + 60, swept for lost batches every 10 s.
    assert c["broker_transport_options"]["visibility_timeout"] == 160 > c["task_time_limit"]
    assert c["broker_transport_options"]["unacked_restore_interval"] == 10
    d = config_from_env({})
    assert (d["task_soft_time_limit"], d["task_time_limit"], d["broker_transport_options"]["visibility_timeout"]) == \
        (600, 660, 720)
    assert d["result_backend_always_retry"] and d["broker_connection_max_retries"] is None
    assert (c["worker_max_tasks_per_child"], c["worker_max_memory_per_child"]) == (7, 1000)
    with pytest.raises(ValueError, match="VISIBILITY_TIMEOUT"):
        config_from_env({"FARM_TIME_LIMIT": "100", "FARM_SOFT_TIME_LIMIT": "50", "FARM_VISIBILITY_TIMEOUT": "90"})
    with pytest.raises(ValueError, match="longer than FARM_SOFT_TIME_LIMIT"):
        config_from_env({"FARM_TIME_LIMIT": "10", "FARM_SOFT_TIME_LIMIT": "50"})
    with pytest.raises(ValueError, match="FARM_TIME_LIMIT must be an integer"):
        config_from_env({"FARM_TIME_LIMIT": "soon"})


def test_transient_failure_retries_and_passes_the_batch_on(tmp_path, monkeypatch):
    """No GL in the process that took the batch: it retries, and the worker it failed on passes it on
    (twice at most) before taking it again. Eager, in-process: no broker needed."""
    from farm.celery.tasks import render_batch_task
    from farm.plan.batches import expand_manifest
    from farm.plan.manifest import load_manifest
    from farm.run import worker as farm_worker
    from farm.run.worker import SyntheticRenderer
    from farm.store import FolderStore as Store

    write_samples(tmp_path / "models")
    (tmp_path / "j.toml").write_text('size = "8x8"\nsequences = ["Stand"]\ntimestamps = [0, 100]\n'
                                     '[[models]]\npath = "models/crate.mdx"\n')
    (batch,) = expand_manifest(load_manifest(tmp_path / "j.toml")).batches
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("eglInitialize failed")
        return SyntheticRenderer()

    monkeypatch.setattr(farm_worker, "get_renderer", flaky)
    hops = []
    real_retry = render_batch_task.retry

    def spy(*a, **kw):
        hops.append((kw["kwargs"]["avoid"], kw["kwargs"]["hops"]))
        return real_retry(*a, **kw)

    monkeypatch.setattr(render_batch_task, "retry", spy)
    r = render_batch_task.apply(kwargs={"job_id": "j", "batch": batch.to_dict(), "out": str(tmp_path / "out")})
    assert r.successful(), r.traceback
    assert [f["status"] for f in r.result["frames"]] == ["done", "done"] and len(calls) == 2
    host = socket.gethostname()
    assert hops == [([host], 0), ([host], 1), ([host], 2)]  # failed here, then passed on twice, then ran here
    assert Store(tmp_path / "out").deliveries("j", batch.id) == 2
