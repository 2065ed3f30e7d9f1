"""The worker services of docker/compose.yaml against a real Celery worker and the real Redis.

Stopping a worker the way docker/compose.yaml does (SIGTERM with REMAP_SIGTERM=SIGQUIT and
FARM_SOFT_SHUTDOWN_TIMEOUT) puts the batch it was running back in the queue at once, not after the
visibility timeout. A real Celery worker on the tests' Redis (conftest.REDIS_PORT), with the farm's app
configuration and a long late-acked task standing in for a render batch."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

redis = pytest.importorskip("redis")
yaml = pytest.importorskip("yaml")

from conftest import redis_url  # noqa: E402

BROKER = redis_url(14)

pytestmark = pytest.mark.slow


@pytest.fixture
def client():
    c = redis.Redis.from_url(BROKER)
    try:
        c.ping()
    except redis.RedisError as e:
        pytest.skip(f"no Redis at {BROKER}: {e}")
    yield c
    c.close()


def _wait(predicate, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _start(tmp_path, queue: str, node: str | None = None, send: bool = True, **extra: str):
    (tmp_path / "shutdown_app.py").write_text(textwrap.dedent("""
        import time
        from farm.celery import app

        @app.task(name="farm_test.sleep", acks_late=True, reject_on_worker_lost=True)
        def sleep(seconds, marker):
            open(marker, "a").write("started\\n")
            time.sleep(seconds)
            return "finished"
    """))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "FARM_BROKER_URL": BROKER, "FARM_QUEUE": queue,
           "FARM_RENDERER": "synthetic", **extra}
    env.pop("FARM_NIGHTLY_MANIFEST", None)
    log = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "shutdown_app", "worker", "--pool=prefork", "--concurrency=1",
         "-Q", queue, "-n", node or f"{queue}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
         "--loglevel=info"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    if not send:
        return worker
    from celery import Celery

    marker = tmp_path / "started.txt"
    Celery(broker=BROKER).send_task("farm_test.sleep", args=[600, str(marker)], queue=queue)
    try:
        _wait(marker.exists, 60, "the worker to start the task")
    except AssertionError:
        worker.kill()
        worker.wait()
        raise
    return worker


@pytest.fixture
def queue(client):
    name = f"farm-shutdown-test-{uuid.uuid4().hex[:10]}"
    yield name
    client.delete(name)


def test_a_stopped_worker_requeues_its_running_batch_at_once(tmp_path, client, queue):
    """compose.yaml's settings: SIGTERM -> cold shutdown, soft phase, cancel, requeue on close."""
    worker = _start(tmp_path, queue, REMAP_SIGTERM="SIGQUIT", FARM_SOFT_SHUTDOWN_TIMEOUT="1")
    try:
        assert client.llen(queue) == 0  # it is running, not queued
        started = time.monotonic()
        worker.send_signal(signal.SIGTERM)  # docker stop
        worker.wait(timeout=60)
        took = time.monotonic() - started
        assert took < 30, f"the worker took {took:.0f} s to stop"
        # Back in the queue now, not after the visibility timeout (an hour or more).
        _wait(lambda: client.llen(queue) == 1, 10, "the task to be back in its queue")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    text = (tmp_path / "worker.log").read_text()
    assert "Soft Shutdown" in text, text[-3000:]


def test_a_killed_worker_strands_its_batch_until_the_visibility_timeout(tmp_path, client, queue):
    """Why stop_grace_period must cover the soft shutdown: after Docker's SIGKILL the batch is only
    in Redis's unacked set, and comes back when the visibility timeout has passed."""
    worker = _start(tmp_path, queue)
    worker.kill()
    worker.wait()
    time.sleep(2)
    assert client.llen(queue) == 0
    stranded = [tag for tag, raw in client.hgetall("unacked").items() if queue.encode() in raw]
    assert stranded  # waiting in the unacked set for the visibility timeout
    for tag in stranded:  # leave nothing behind for a later restore
        client.hdel("unacked", tag)
        client.zrem("unacked_index", tag)


def test_the_compose_health_check_passes_for_a_live_worker_only(tmp_path, client, queue):
    """The worker service's health check, word for word from compose.yaml, as its container runs it
    ($HOSTNAME is the container's host name, which Celery's %h expands to)."""
    from pathlib import Path

    compose = yaml.safe_load((Path(__file__).resolve().parents[1] / "docker" / "compose.yaml").read_text())
    service = compose["services"]["worker"]
    check = service["healthcheck"]["test"][1].replace("$$", "$")
    node = service["command"][service["command"].index("-n") + 1]
    env = {**os.environ, "FARM_BROKER_URL": BROKER, "HOSTNAME": socket.gethostname(),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("FARM_NIGHTLY_MANIFEST", None)

    def healthy(wait: str = "10") -> bool:  # the failing cases need not wait the check's full 10 s
        cmd = check.replace("--timeout 10", f"--timeout {wait}")
        return subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, timeout=60).returncode == 0

    assert shlex.split(check)[:4] == ["celery", "-A", "farm.celery", "inspect"]
    assert "--timeout 10" in check
    assert not healthy("1")  # no worker of that name on this broker yet
    worker = _start(tmp_path, queue, node=node, send=False)
    try:
        _wait(lambda: "ready." in (tmp_path / "worker.log").read_text(), 60, "the worker to be ready")
        _wait(healthy, 60, "the health check to pass")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    assert not healthy("1")
