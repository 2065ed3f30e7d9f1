"""A hard time limit keeps the frames already rendered (issue 34 item 5), with a real Redis and a
real `celery worker`: FARM_SOFT_TIME_LIMIT=0 FARM_TIME_LIMIT=2 kills the pool process mid-batch; every
frame whose image is in the store is done in the job, and only frames without an image fail."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REDIS_SERVER
from test_celery_faults import _env, _job_file, _stop, _worker

from renderer.png import read_png

pytestmark = [pytest.mark.slow, pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed")]


def test_a_hard_time_limit_loses_no_stored_frame(redis_server, tmp_path):  # noqa: F811
    from renderer.samples import write_samples

    write_samples(tmp_path / "models")
    times = list(range(0, 6000, 100))  # 60 frames of 150 ms (the stand-in) in one batch: 2 s cuts it
    manifest = tmp_path / "job.toml"
    manifest.write_text(f'name = "hard"\nsize = "16x16"\ntimestamps = {times}\nsequences = ["Stand"]\n'
                        '[[models]]\npaths = ["models/crate.mdx"]\n')
    env = _env(redis_server.url, FARM_SOFT_TIME_LIMIT="0", FARM_TIME_LIMIT="2",
               FARM_BATCH_FRAMES="60", FARM_TASK_MAX_RETRIES="0")
    worker = _worker(env, "hard-a", tmp_path / "worker.log")
    out = tmp_path / "out"
    try:
        client = subprocess.run([sys.executable, "-m", "farm", "run", str(manifest), "--out", str(out),
                                 "--broker", redis_server.url, "--no-compare", "--no-progress"], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=240)
    finally:
        _stop(worker)
    log = (tmp_path / "worker.log").read_text()
    assert "TimeLimitExceeded" in log or "Hard time limit" in log, log[-3000:]
    traces = _job_file(out)["traces"]
    assert len(traces) == 60, client.stderr
    stored = {}  # each image in the store (named by its sha256), by its trace's time
    for png in (out / "images").rglob("*.png"):
        stored[read_png(png.read_bytes())[1]["time_ms"]] = png.name.split(".")[0]
    done = {t["time_ms"]: t["digest"] for t in traces.values() if t["status"] == "done"}
    failed = [t for t in traces.values() if t["status"] == "failed"]
    assert 0 < len(stored) < 60 and failed, (len(stored), client.stderr)  # the limit did cut the batch
    lost = sorted(set(stored) - set(done))
    assert not lost, f"{len(lost)} frames with a stored image reported failed: {lost}"
    assert done == stored
    print(f"\nhard limit 2 s: {len(done)} frames rendered and done, {len(failed)} failed, 0 lost")
