"""Issue 26: a job whose files a worker cannot see. The "other machine" is a real Celery worker in a
private mount namespace (`unshare -m`) with a tmpfs over the folder that holds the models, their
textures, the asset root, the game data and the coordinator's own store: all it shares with the
coordinator is the S3 bucket (moto_server on loopback) and the broker (Redis). The job's inputs
travel through the bucket (FARM_INPUTS auto: the store is s3://); the worker renders them from its
bounded cache, and `farm diff` of that run against a local run of the same manifest (folder store,
files at their paths) reports no change: the same pixels, the same inputs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import redis_up, redis_url
from fx_util import fx_model, prem, white
from render_util import quad
from s3server import s3  # noqa: F401 - s3 is a fixture
from test_store_s3 import BUCKET, _farm, _images_whole, _index, _job

from renderer.model import Layer, Material
from renderer.samples import write_samples

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _project(where: Path) -> Path:
    """Sample models, a map folder whose model finds a texture above it, one in an asset root, one
    missing, and a PREM child model: the manifest renders them at three times."""
    write_samples(where / "models")
    units = where / "maps" / "Keep.w3x" / "units"
    units.mkdir(parents=True)
    fx_model(units, "Spark", geosets=[quad(half=8.0)], materials=[Material(layers=[Layer(texture_id=0,
                                                                                         shading_flags=1)])],
             textures={"spark.tga": white(rgba=(0, 250, 0, 255))})
    fx_model(units, "tower", geosets=[quad(half=12.0, y=-14), quad(half=12.0, y=14, material=1)],
             materials=[Material(layers=[Layer(texture_id=i, shading_flags=1)]) for i in range(3)],
             prems=[prem(1, emission_rate=2.0, lifespan=5.0, speed=0.0, path="Spark.mdx")],
             textures={"stone.tga": white(rgba=(200, 20, 20, 255)), "roof.tga": white(rgba=(20, 20, 200, 255)),
                       "lost.tga": white()})
    (units / "stone.tga").rename(where / "maps" / "Keep.w3x" / "stone.tga")
    (where / "shared-textures").mkdir()
    (units / "roof.tga").rename(where / "shared-textures" / "roof.tga")
    (units / "lost.tga").unlink()
    m = where / "job.toml"
    m.write_text('name = "travel"\nsize = "32x32"\ntimestamps = [0, 600, 1400]\nbackground = "#000000"\n'
                 f'assets = ["{where / "shared-textures"}"]\n'
                 '[[models]]\npaths = ["models/*.mdx", "maps/**/tower.mdx"]\n')
    return m


def _worker_elsewhere(s3_env: dict, hide: Path, queue: str, broker: str, log: Path) -> subprocess.Popen:
    """A Celery worker in its own mount namespace, where `hide` is an empty tmpfs."""
    home = hide / "worker-home"
    script = (f"mount -t tmpfs -o size=64m tmpfs {hide} && mkdir -p {home} && cd {home} && "
              f"exec {sys.executable} -m celery -A farm.celery worker --pool prefork --concurrency 2 "
              f"-n travel-{queue}@%h -Q {queue} -l info --without-mingle --without-gossip")
    env = {**s3_env, "PYTHONPATH": str(ROOT), "FARM_BROKER_URL": broker, "FARM_RESULT_BACKEND": broker,
           "FARM_QUEUE": queue, "FARM_INPUT_CACHE": str(home / "cache"), "FARM_INPUT_CACHE_MB": "64",
           "HOME": str(home)}
    with open(log, "wb") as f:
        return subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", script], env=env,
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(worker: subprocess.Popen) -> None:
    try:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(30)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)


def skip_without_a_worker_elsewhere() -> None:
    """Skip, with the reason, where a Celery worker in its own mount namespace cannot be started."""
    if not redis_up():
        pytest.skip("no Redis for the Celery test (scripts/ensure-redis.sh starts one)")
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) for a worker in its own mount namespace")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(f"cannot make a mount namespace here: {probe.stderr.strip()}")


def test_a_worker_that_cannot_see_the_files_renders_what_a_local_run_renders(s3, tmp_path):  # noqa: F811
    skip_without_a_worker_elsewhere()
    hidden = tmp_path / "site"  # everything the coordinator sees: models, textures, its local store
    hidden.mkdir()
    manifest = _project(hidden)
    local = _farm(s3, hidden, "run", str(manifest), "--out", str(hidden / "local-out"), "--job-id", "here",
                  "--workers", "1", "--no-compare", "--no-progress")
    assert local.returncode == 0, local.stdout + local.stderr

    tag = uuid.uuid4().hex[:8]
    broker = redis_url(11)
    log = tmp_path / "worker.log"
    worker = _worker_elsewhere(s3.env, hidden, f"farm-travel-{tag}", broker, log)
    try:
        time.sleep(1.0)
        assert worker.poll() is None, log.read_text()
        url = f"s3://{BUCKET}/travel"
        env = {**s3.env, "FARM_QUEUE": f"farm-travel-{tag}", "FARM_RESULT_BACKEND": broker}
        there = _farm(s3, hidden, "run", str(manifest), "--out", url, "--job-id", "there", "--broker", broker,
                      "--no-compare", "--no-progress", env=env)
        assert there.returncode == 0, there.stdout + there.stderr + log.read_text()[-4000:]
    finally:
        _stop(worker)
    job = _job(s3, "travel", "there")
    assert {t["status"] for t in job["traces"].values()} == {"done"}, job["traces"]
    assert all(b.get("inputs") for b in job["batches"].values())  # every batch carried its inputs
    _images_whole(s3, "travel", _index(s3, "travel", "there").values())
    assert any(k.startswith("inputs/") for k in s3.keys("travel"))
    assert "Traceback" not in log.read_text()

    diff = _farm(s3, hidden, "diff", str(hidden / "local-out" / "jobs" / "here.json"), f"{url}/jobs/there.json",
                 "--json")
    assert diff.returncode == 0, diff.stdout + diff.stderr
    report = json.loads(diff.stdout)
    assert report["verdict"] == "same", report
    index_here = json.loads((hidden / "local-out" / "jobs" / "here" / "index.json").read_text())
    assert _index(s3, "travel", "there") == index_here  # byte-identical frames
