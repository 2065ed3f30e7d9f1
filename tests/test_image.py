"""Issue 36: docker/Dockerfile built with podman, and the farm run inside the image. The base stands in
for the official `python:3.11-slim-bookworm` (tests/podman_image.py: mmdebstrap, cached under
build/image-cache/ by its recipe). Inside the image: `farm demo` passes; a Celery worker started
from the image renders a job that the host's coordinator sends through a Redis on loopback, into a
folder store the host reads and into an `s3://` store on moto with the inputs travelling (the worker
has no model file in its root), and `farm diff` against a host run of the same manifest finds no
change. The image's size, its build time and the in-image demo time are printed and written to
build/image-figures.json (docker/README's figures come from there)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import podman_image as pi
import pytest
from conftest import REDIS_SERVER
from s3server import BUCKET, s3  # noqa: F401 - s3 is a fixture

pytestmark = pytest.mark.slow

HOST_ENV = {"EGL_PLATFORM": "surfaceless", "PYOPENGL_PLATFORM": "egl", "PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def image():
    """The image, built (layers cached under build/image-cache/; not at all when it was built from the
    same inputs); MODELFARM_IMAGE_NO_CACHE=1 builds it cold. Yields (the figures, how to run a
    command in it)."""
    if reason := pi.why_not():
        pytest.skip(reason)
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (scripts/system-deps.sh installs it)")
    figures = json.loads(pi.FIGURES.read_text()) if pi.FIGURES.exists() else {}
    start = time.monotonic()
    base_made = pi.base_image_made()
    base_s = time.monotonic() - start
    cold = base_made or os.environ.get("MODELFARM_IMAGE_NO_CACHE") == "1"
    build_s = pi.build(no_cache=cold)
    figures.update(size_mb=round(pi.size_mb()), last_build="cold" if cold else "cached" if build_s else "skipped",
                   last_build_s=round(build_s or 0))
    if cold:
        figures.update(cold_build_s=round(build_s), base_s=round(base_s), cold_at=time.strftime("%Y-%m-%d"))
    # podman run where it works; else (this sandbox) the image's mounted root under unshare + chroot.
    runner = pi.Inside(podman_run=pi.podman_run_works() is None)
    figures["runs_with"] = runner.how
    pi.FIGURES.parent.mkdir(exist_ok=True)
    pi.FIGURES.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"\nimage: {figures}")
    try:
        yield figures, runner
    finally:
        runner.close()


@pytest.fixture
def site():
    """A folder under /tmp (the same path inside the image) that the image's user owns."""
    where = Path(tempfile.mkdtemp(prefix="modelfarm-image-", dir="/tmp"))
    where.chmod(0o755)
    try:
        yield where
    finally:
        shutil.rmtree(where)


def _manifest(where: Path) -> Path:
    from renderer.samples import write_samples

    write_samples(where / "models")
    m = where / "job.toml"
    m.write_text('name = "image"\nsize = "32x32"\ntimestamps = [0, 500]\nbackground = "#000000"\n'
                 '[[models]]\npaths = ["models/*.mdx"]\n')
    return m


def _farm(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm", *args], cwd=cwd,
                          env={**HOST_ENV, "HOME": str(cwd), **(env or {})}, capture_output=True, text=True,
                          timeout=600)


def test_farm_demo_passes_inside_the_image(image, site):
    figures, inside = image
    os.chown(site, pi.UID, pi.UID)
    start = time.monotonic()
    r = inside.run(["farm", "demo", "--out", str(site / "demo-out")], binds=[site])
    demo_s = time.monotonic() - start
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "demo: PASS" in r.stdout, r.stdout[-2000:]
    assert (site / "demo-out" / "report" / "index.html").is_file()  # written where the host reads it
    figures["demo_s"] = round(demo_s, 1)
    pi.FIGURES.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"\nfarm demo in the image: {demo_s:.1f} s")


def test_the_image_runs_as_farm_and_keeps_no_wheel_and_no_build_secret(image):
    _, inside = image
    r = inside.run(["sh", "-c", "id -un; ls /wheels /run/secrets/ca 2>&1; python -m farm.version"])
    lines = r.stdout.splitlines()
    assert lines[0] == "farm" and lines[-1].startswith("farm 0."), r.stdout + r.stderr
    assert all("No such file" in ln for ln in lines[1:-1]) and len(lines) == 4, r.stdout  # both absent


def _worker(inside: pi.Inside, broker: str, queue: str, binds: list[Path], env: dict, log: Path,
            uid: int = pi.UID) -> subprocess.Popen:
    argv = ["celery", "-A", "farm.celery", "worker", "--pool", "prefork", "--concurrency", "2", "-n",
            f"image-{queue}@%h", "-Q", queue, "-l", "info", "--without-mingle", "--without-gossip"]
    return inside.start(argv, binds=binds, env={"FARM_BROKER_URL": broker, "FARM_RESULT_BACKEND": broker,
                                                "FARM_QUEUE": queue, **env}, log=log, uid=uid)


def _stop(worker: subprocess.Popen) -> None:
    try:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)
    except ProcessLookupError:
        pass


def _same(cwd: Path, here: str, there: str, env: dict | None = None) -> None:
    diff = _farm(cwd, "diff", here, there, "--json", env=env)
    assert diff.returncode == 0, diff.stdout[-3000:] + diff.stderr[-3000:]
    assert json.loads(diff.stdout)["verdict"] == "same", diff.stdout[-3000:]


def test_a_worker_in_the_image_renders_a_host_job_into_a_folder_store(image, site, redis_server):
    _, inside = image
    manifest = _manifest(site)
    local = _farm(site, "run", str(manifest), "--out", str(site / "local"), "--job-id", "here", "--workers", "1",
                  "--no-compare", "--no-progress")
    assert local.returncode == 0, local.stdout + local.stderr
    store = site / "store"
    queue = f"image-{uuid.uuid4().hex[:8]}"
    log = site / "worker.log"
    # The folder store is shared with the host's coordinator, root here (its Python is under /root),
    # so this worker runs as root too: a shared store must be writable by both (docker/README).
    worker = _worker(inside, redis_server.url, queue, [site], {}, log, uid=0)
    try:
        url = redis_server.url
        there = _farm(site, "run", str(manifest), "--out", str(store), "--job-id", "there", "--broker", url,
                      "--no-compare", "--no-progress", env={"FARM_QUEUE": queue, "FARM_RESULT_BACKEND": url})
        assert there.returncode == 0, there.stdout + there.stderr + log.read_text()[-4000:]
    finally:
        _stop(worker)
    job = json.loads((store / "jobs" / "there.json").read_text())
    assert job["runs"][0]["mode"] == "celery" and {t["status"] for t in job["traces"].values()} == {"done"}
    assert "Traceback" not in log.read_text()
    _same(site, str(site / "local" / "jobs" / "here.json"), str(store / "jobs" / "there.json"))


def test_a_worker_in_the_image_that_sees_no_model_renders_a_host_job_into_s3(image, site, redis_server, s3):  # noqa: F811
    _, inside = image
    manifest = _manifest(site)
    local = _farm(site, "run", str(manifest), "--out", str(site / "local"), "--job-id", "here", "--workers", "1",
                  "--no-compare", "--no-progress")
    assert local.returncode == 0, local.stdout + local.stderr
    seen = inside.run(["ls", str(site / "models")])
    assert seen.returncode != 0 and "No such file" in seen.stderr, seen.stdout  # the worker's root has no model
    aws = {k: v for k, v in s3.env.items() if k.startswith("AWS_")}
    queue = f"image-s3-{uuid.uuid4().hex[:8]}"
    log = site / "worker.log"
    worker = _worker(inside, redis_server.url, queue, [], {**aws, "AWS_CONFIG_FILE": "/nonexistent",
                                                     "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}, log)
    url = f"s3://{BUCKET}/image-{queue}"
    try:
        there = _farm(site, "run", str(manifest), "--out", url, "--job-id", "there", "--broker", redis_server.url,
                      "--inputs", "travel", "--no-compare", "--no-progress",
                      env={**s3.env, **HOST_ENV, "HOME": str(site), "FARM_QUEUE": queue,
                           "FARM_RESULT_BACKEND": redis_server.url})
        assert there.returncode == 0, there.stdout + there.stderr + log.read_text()[-4000:]
    finally:
        _stop(worker)
    job = json.loads(s3.get(f"image-{queue}/jobs/there.json"))
    assert {t["status"] for t in job["traces"].values()} == {"done"}, job["traces"]
    assert all(b.get("inputs") for b in job["batches"].values())  # every batch carried its inputs
    assert "Traceback" not in log.read_text()
    _same(site, str(site / "local" / "jobs" / "here.json"), f"{url}/jobs/there.json", env=s3.env)
