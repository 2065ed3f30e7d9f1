"""Results only move forward and a run always ends (issue 23, items 5-7), with real parts: the
folder store written by several processes at once, a real Redis of our own on a spare port (with
and without AOF) and real `celery worker` processes that the tests stop (SIGSTOP) and kill.

- a late delivery's failure never replaces a frame another delivery recorded as done, and
  redeliveries that did not die (a stopped process, a soft time limit) are not counted as deaths;
- a batch killed by Celery's hard time limit keeps the frames it had rendered;
- a pool process stopped before it accepts its batch is killed after the hard limit (billiard arms
  the limits only on acceptance) and the batch runs elsewhere, once; so is one stuck in its start-up;
- `farm retry --pending` while the batches are still queued follows them: each frame renders once;
- Redis restarted empty mid-job (no AOF): the client sends the lost batches again and ends, each
  frame rendered once.

The renderer is the no-GL stand-in, wrapped (`counting_renderer`) to append one line per frame it
renders to the file FORWARD_TEST_RENDER_LOG names, so the tests count real renders.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REDIS_SERVER, Redis
from test_celery_faults import _env, _stop, _wait_for, _worker

from farm.run.execute import BatchResult, FrameResult, render_batch
from farm.store import FolderStore

ROOT = Path(__file__).resolve().parents[1]
RENDER_LOG = "FORWARD_TEST_RENDER_LOG"
needs_redis = pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")


pytestmark = pytest.mark.slow  # real Celery workers (make test-fast leaves them out)


def counting_renderer():
    """FARM_RENDERER=test_celery_forward:counting_renderer: the stand-in, counting its renders."""
    from farm.run.worker import SyntheticRenderer

    inner = SyntheticRenderer(float(os.environ.get("FARM_SYNTHETIC_DELAY_MS") or 0))
    log = os.environ[RENDER_LOG]

    class Counting:
        def render(self, model, spec, model_digest=None):
            frame = inner.render(model, spec, model_digest=model_digest)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, f"{os.getpid()} {frame.trace.get('time_ms')}\n".encode())
            finally:
                os.close(fd)
            return frame

        def __getattr__(self, name):
            return getattr(inner, name)

    return Counting()


def stuck_once_renderer():
    """FARM_RENDERER=test_celery_forward:stuck_once_renderer: the first pool process to start never
    finishes its start-up (a driver that hangs); the next ones count their renders."""
    marker = Path(os.environ[RENDER_LOG]).with_suffix(".stuck")
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return counting_renderer()
    time.sleep(3600)


def _manifest(tmp_path: Path, frames: int, name: str = "forward") -> Path:
    from renderer.samples import write_samples

    write_samples(tmp_path / "models")
    times = ", ".join(str(i * 10) for i in range(frames))
    manifest = tmp_path / f"{name}.toml"
    manifest.write_text(f'name = "{name}"\nsize = "8x8"\nsequences = ["Stand"]\ntimestamps = [{times}]\n'
                        '[[models]]\npath = "models/crate.mdx"\n')
    return manifest


def _counting_env(redis_url: str, tmp_path: Path, **extra) -> dict:
    env = {**_env(redis_url), **extra, "FARM_RENDERER": "test_celery_forward:counting_renderer"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env[RENDER_LOG] = str(tmp_path / "renders.log")
    return env


def _renders(tmp_path: Path) -> int:
    p = tmp_path / "renders.log"
    return p.read_text().count("\n") if p.exists() else 0


def _job(out: Path) -> dict:
    files = sorted((out / "jobs").glob("*.json"))
    return json.loads(files[0].read_text()) if files else {}


def _farm(args: list[str], env: dict, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "farm", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _pool(worker: subprocess.Popen) -> set[int]:
    out = set()
    for task in Path(f"/proc/{worker.pid}/task").iterdir():
        out.update(int(c) for c in (task / "children").read_text().split())
    return out


# --------------------------------------------------------------------------------------------
# The store: results move forward


def _frames(keys: list[str], status: str, error: str | None = None) -> dict:
    return {"batch": "b1", "frames": [{"key": k, "time_ms": i, "status": status,
                                       "digest": f"d{i}" if status == "done" else None, "error": error}
                                      for i, k in enumerate(keys)]}


def test_a_late_failure_never_replaces_a_done_frame(tmp_path):
    store = FolderStore(tmp_path)
    keys = [f"k{i}" for i in range(4)]
    store.write_batch_result("j", _frames(keys[:2], "done"))  # the redelivered batch: two frames so far
    late = _frames(keys, "failed", "the frame took longer than the frame time limit of 8 s")
    merged = store.write_batch_result("j", late)  # the SIGSTOPped first delivery resumes, late
    assert [f["status"] for f in merged["frames"]] == ["done", "done", "failed", "failed"]
    assert store.read_batch_result("j", "b1") == merged and merged["frames"][0]["digest"] == "d0"
    store.write_batch_result("j", _frames(keys, "done"))  # the rest done: done beats failed
    assert {f["status"] for f in store.read_batch_result("j", "b1")["frames"]} == {"done"}
    store.write_batch_result("j", late)
    assert {f["status"] for f in store.read_batch_result("j", "b1")["frames"]} == {"done"}


def _writer(root: str, n: int, done: list[int]) -> None:
    store = FolderStore(root)
    keys = [f"k{i}" for i in range(n)]
    for i in range(n):  # each process: one frame done, then failures over every frame
        store.write_batch_result("j", {"batch": "b1", "frames": [
            {"key": keys[i], "time_ms": i, "status": "done" if i in done else "failed", "digest": None,
             "error": None}]})
        store.write_batch_result("j", _frames(keys, "failed", f"late {os.getpid()}"))


def test_concurrent_writers_never_lose_a_done_frame(tmp_path):
    n = 40
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), n, list(range(w, n, 4)))) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    frames = FolderStore(tmp_path).read_batch_result("j", "b1")["frames"]
    assert len(frames) == n and all(f["status"] == "done" for f in frames)


def _crate_batch(tmp_path: Path):
    from farm.plan.batches import expand_manifest
    from farm.plan.manifest import load_manifest

    (batch,) = expand_manifest(load_manifest(_manifest(tmp_path, 3))).batches
    return batch


def _begin_and_stop(root: str, job: str, batch_id: str) -> None:
    FolderStore(root).begin_batch(job, batch_id)
    os.kill(os.getpid(), signal.SIGSTOP)  # a stalled pool process holding its delivery


def test_only_deliveries_whose_process_died_count_as_deaths(tmp_path):
    from farm.run.worker import SyntheticRenderer

    batch = _crate_batch(tmp_path)
    store = FolderStore(tmp_path / "out")

    class Stop(Exception):
        pass

    class StopsAtOnce(SyntheticRenderer):
        def render(self, *a, **kw):
            raise Stop()  # a soft time limit: the delivery ends, nobody died

    for _ in range(3):  # three deliveries that ended (the audit's "died 3 times" though none died)
        render_batch(batch, StopsAtOnce, store, "j", abort=(Stop,), max_deliveries=3)
    assert store.deliveries("j", batch.id) == 3
    stalled = multiprocessing.get_context("fork").Process(target=_begin_and_stop,
                                                           args=(str(tmp_path / "out"), "j", batch.id))
    stalled.start()
    try:
        _wait_for(lambda: store.deliveries("j", batch.id) == 4, 30, "the stalled delivery did not begin")
        result = render_batch(batch, SyntheticRenderer, store, "j", max_deliveries=1)  # a redelivery
        assert [f.status for f in result.frames] == ["done"] * 3, result  # the stopped process is alive
    finally:
        os.kill(stalled.pid, signal.SIGKILL)
        stalled.join(10)
    store.remove_batch_result("j", batch.id)
    result = render_batch(batch, SyntheticRenderer, store, "j", max_deliveries=1)
    assert {f.error for f in result.frames} == {
        "the worker process died 1 times rendering this batch (model models/crate.mdx); not trying again"}


def test_a_redelivery_keeps_and_skips_the_frames_already_done(tmp_path):
    from farm.run.worker import SyntheticRenderer

    batch = _crate_batch(tmp_path)
    store = FolderStore(tmp_path / "out")
    store.begin_batch("j", batch.id)  # a first delivery that died after recording its first frame
    first = render_batch(batch, SyntheticRenderer, FolderStore(tmp_path / "first"), "j")
    store.write_batch_result("j", BatchResult(batch.id, first.frames[:1]).to_dict())
    rendered = []

    class Counting(SyntheticRenderer):
        def render(self, model, spec, model_digest=None):
            rendered.append(spec.time_ms)
            return super().render(model, spec, model_digest=model_digest)

    result = render_batch(batch, Counting, store, "j")
    assert rendered == batch.times[1:] and [f.status for f in result.frames] == ["done"] * 3
    assert result.frames[0] == FrameResult(**{**first.frames[0].to_dict(), "render_s": None})


# --------------------------------------------------------------------------------------------
# Celery: the hard time limit, a stopped pool process, retry --pending, Redis lost


@needs_redis
def test_a_hard_time_limit_keeps_the_frames_already_rendered(redis_server, tmp_path):
    manifest = _manifest(tmp_path, 200)  # one batch of 10 s: stopped long before its soft limit
    env = _counting_env(redis_server.url, tmp_path, FARM_SOFT_TIME_LIMIT="3", FARM_TIME_LIMIT="5",
                        FARM_VISIBILITY_TIMEOUT="60", FARM_BATCH_FRAMES="300", FARM_SYNTHETIC_DELAY_MS="50")
    worker = _worker(env, "forward-hard", tmp_path / "w.log")
    out = tmp_path / "out"
    try:
        client = _farm(["run", str(manifest), "--out", str(out), "--broker", redis_server.url, "--no-compare",
                        "--no-progress"], env, tmp_path)
        batch_results = out / "jobs"
        _wait_for(lambda: any(sum(f["status"] == "done" for f in json.loads(p.read_text())["frames"]) >= 5
                              for p in batch_results.glob("*/batches/*.json")), 90, "nothing recorded")
        for pid in _pool(worker):
            os.kill(pid, signal.SIGSTOP)  # past the soft limit it cannot react: the hard limit kills it
        outs, errs = client.communicate(timeout=120)
    finally:
        _stop(worker)
    job = _job(out)
    done = [t for t in job["traces"].values() if t["status"] == "done"]
    failed = [t for t in job["traces"].values() if t["status"] == "failed"]
    assert client.returncode == 1 and len(done) >= 5 and failed, (outs, errs)
    assert all(t["digest"] for t in done) and {t["error"].split(":")[1].strip() for t in failed} == \
        {"TimeLimitExceeded"}, failed[0]["error"]


@needs_redis
def test_a_pool_process_stopped_before_it_accepts_is_killed_after_the_hard_limit(redis_server, tmp_path):
    manifest = _manifest(tmp_path, 12)
    env = _counting_env(redis_server.url, tmp_path, FARM_SOFT_TIME_LIMIT="3", FARM_TIME_LIMIT="5",
                        FARM_VISIBILITY_TIMEOUT="120", FARM_BATCH_FRAMES="4", FARM_SYNTHETIC_DELAY_MS="20")
    worker = _worker(env, "forward-stop", tmp_path / "w.log")
    out = tmp_path / "out"
    try:
        _wait_for(lambda: "renderer test_celery_forward:counting_renderer ready" in (tmp_path / "w.log").read_text(),
                  60, "the worker's pool process did not start")
        (stopped,) = _pool(worker)
        os.kill(stopped, signal.SIGSTOP)  # idle: the next batch is written to it and never accepted
        client = _farm(["run", str(manifest), "--out", str(out), "--broker", redis_server.url, "--no-compare",
                        "--no-progress"], env, tmp_path)
        outs, errs = client.communicate(timeout=100)  # before: no limit ever fired; the run hung
    finally:
        _stop(worker)
    log = (tmp_path / "w.log").read_text()
    assert client.returncode == 0, (outs, errs, log[-3000:])
    assert f"no process accepted it (stopped or stuck): killing pool process(es) {stopped}," in log
    assert {t["status"] for t in _job(out)["traces"].values()} == {"done"}
    assert _renders(tmp_path) == 12  # the stopped process rendered nothing; nothing rendered twice


@needs_redis
def test_a_pool_process_stuck_in_its_start_up_is_replaced(redis_server, tmp_path):
    manifest = _manifest(tmp_path, 8)
    env = _counting_env(redis_server.url, tmp_path, FARM_SOFT_TIME_LIMIT="3", FARM_TIME_LIMIT="5",
                        FARM_VISIBILITY_TIMEOUT="120", FARM_BATCH_FRAMES="4", FARM_SYNTHETIC_DELAY_MS="20")
    env["FARM_RENDERER"] = "test_celery_forward:stuck_once_renderer"
    worker = _worker(env, "forward-stuck", tmp_path / "w.log")
    out = tmp_path / "out"
    try:
        _wait_for(lambda: " ready." in (tmp_path / "w.log").read_text(), 60, "the worker did not start")
        (stuck,) = _pool(worker)
        client = _farm(["run", str(manifest), "--out", str(out), "--broker", redis_server.url, "--no-compare",
                        "--no-progress"], env, tmp_path)
        outs, errs = client.communicate(timeout=100)  # before: the batch waited for that process forever
    finally:
        _stop(worker)
    log = (tmp_path / "w.log").read_text()
    assert client.returncode == 0, (outs, errs, log[-3000:])
    assert f"no process accepted it (stopped or stuck): killing pool process(es) {stuck}," in log
    assert {t["status"] for t in _job(out)["traces"].values()} == {"done"} and _renders(tmp_path) == 8


@needs_redis
def test_retry_pending_while_queued_renders_each_frame_once(redis_server, tmp_path):
    manifest = _manifest(tmp_path, 200)
    env = _counting_env(redis_server.url, tmp_path, FARM_BATCH_FRAMES="20", FARM_SYNTHETIC_DELAY_MS="5")
    out = tmp_path / "out"
    run = _farm(["run", str(manifest), "--out", str(out), "--broker", redis_server.url, "--no-compare",
                 "--no-progress"], {**env, "PYTHONFAULTHANDLER": "1"}, tmp_path)
    import redis

    r = redis.Redis.from_url(redis_server.url)
    _wait_for(lambda: r.llen("faults") == 10, 60, "the batches were not sent")
    run.send_signal(signal.SIGINT)  # `farm run` interrupted; no worker has started yet
    try:
        run.communicate(timeout=90)
    except subprocess.TimeoutExpired:  # it hung (2 fresh-clone suites in 3): say where, every thread of it
        run.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: the tracebacks on stderr
        outs, errs = run.communicate(timeout=30)
        pytest.fail(f"the interrupted farm run did not end in 90 s; its threads:\n{errs[-20000:]}")
    job_id = _job(out)["job"]
    retry = _farm(["retry", job_id, "--pending", "--out", str(out), "--broker", redis_server.url, "--no-progress"],
                  env, tmp_path)
    worker = None
    try:
        # The worker starts once retry has looked at the broker (a client whose last command read
        # the unacked hash, or already polls the results): the batches are still queued then.
        _wait_for(lambda: retry.poll() is not None or any(c.get("cmd") in ("hvals", "mget") for c in r.client_list()),
                  60, "retry did not look at the broker")
        worker = _worker(env, "forward-retry", tmp_path / "w.log", concurrency=2)
        outs, errs = retry.communicate(timeout=180)
    finally:
        if worker is not None:
            _stop(worker)
    assert retry.returncode == 0, (outs, errs)
    job = _job(out)
    assert {t["status"] for t in job["traces"].values()} == {"done"} and len(job["traces"]) == 200
    assert _renders(tmp_path) == 200  # before: 400 (every queued batch sent a second time)
    store = FolderStore(out)
    assert [store.deliveries(job_id, b) for b in job["batches"]] == [1] * 10


@needs_redis
def test_redis_restarted_without_its_data_loses_no_batch(tmp_path):
    redis_server = Redis(tmp_path)
    redis_server.start()
    manifest = _manifest(tmp_path, 120)
    env = _counting_env(redis_server.url, tmp_path, FARM_BATCH_FRAMES="6", FARM_SYNTHETIC_DELAY_MS="30",
                        FARM_BROKER_RETRY_S="60", FARM_SOFT_TIME_LIMIT="20", FARM_TIME_LIMIT="25",
                        FARM_VISIBILITY_TIMEOUT="40")
    worker = _worker(env, "forward-lost", tmp_path / "w.log", concurrency=2)
    out = tmp_path / "out"
    try:
        client = _farm(["run", str(manifest), "--out", str(out), "--broker", redis_server.url, "--no-compare",
                        "--no-progress"], env, tmp_path)
        _wait_for(lambda: _renders(tmp_path) >= 12 or client.poll() is not None, 90, "nothing rendered")
        os.killpg(redis_server.proc.pid, signal.SIGKILL)  # no goodbye, and no AOF to come back with
        redis_server.proc.wait(10)
        for f in tmp_path.glob("appendonly*"):
            subprocess.run(["rm", "-rf", str(f)], check=True)
        time.sleep(2)
        redis_server.start()
        outs, errs = client.communicate(timeout=240)
    finally:
        _stop(worker)
        redis_server.stop()
    assert client.returncode == 0, (outs, errs, (tmp_path / "w.log").read_text()[-3000:])
    assert "the broker lost" in errs and "sending them again" in errs, errs
    job = _job(out)
    assert {t["status"] for t in job["traces"].values()} == {"done"} and len(job["traces"]) == 120
    assert _renders(tmp_path) == 120, "a frame rendered twice, or one lost"
