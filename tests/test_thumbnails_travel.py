"""`farm thumbnails -o s3://...` from a worker that shares nothing but the bucket and the broker: a
real Celery worker in its own mount namespace (`unshare -m`) with a tmpfs over the folder that
holds the models and their textures (as tests/test_inputs_travel.py does), moto_server on loopback.
With `--inputs shared` it cannot read a model: every model fails for a reason outside the model
(cause "input"), the exit status is 1 and no placeholder is indexed as rendered; with the default
(`auto`: travel, the output is s3://) every model renders, the same images as a local run, each
also under its content-digest key."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from conftest import redis_url
from s3server import s3  # noqa: F401 - s3 is a fixture
from test_inputs_travel import _stop, _worker_elsewhere, skip_without_a_worker_elsewhere
from test_store_s3 import BUCKET, _farm

from renderer.png import read_png
from renderer.samples import write_samples

pytestmark = pytest.mark.slow


def test_thumbnails_into_a_bucket_from_a_worker_that_sees_only_the_bucket(s3, tmp_path):  # noqa: F811
    skip_without_a_worker_elsewhere()
    hidden = tmp_path / "site"
    write_samples(hidden / "models")
    local = _farm(s3, hidden, "thumbnails", "models", "-o", str(hidden / "local"), "--size", "32", "--workers", "1",
                  "--no-progress", "--sheet", "0")
    assert local.returncode == 0, local.stdout + local.stderr
    here = {e["id"]: e for e in json.loads((hidden / "local" / "index.json").read_text())["models"]}

    tag = uuid.uuid4().hex[:8]
    broker = redis_url(11)
    log = tmp_path / "worker.log"
    worker = _worker_elsewhere(s3.env, hidden, f"farm-thumbs-{tag}", broker, log)
    url = f"s3://{BUCKET}/thumbs"
    env = {**s3.env, "FARM_QUEUE": f"farm-thumbs-{tag}", "FARM_RESULT_BACKEND": broker}
    args = ("thumbnails", "models", "-o", url, "--size", "32", "--broker", broker, "--no-progress", "--sheet", "0")
    try:
        time.sleep(1.0)
        assert worker.poll() is None, log.read_text()
        shared = _farm(s3, hidden, *args, "--inputs", "shared", env=env)
        assert shared.returncode == 1, shared.stdout + shared.stderr + log.read_text()[-4000:]
        index = json.loads(s3.get("thumbs/index.json"))
        assert index["counts"]["done"] == 0 and len(index["models"]) == len(here)
        for e in index["models"]:  # failed for the worker's sake, not the model's: no tile as if rendered
            assert (e["status"], e["cause"], e["thumbnail"], e["digest_thumbnail"]) == ("failed", "input", None, None)
            assert "cannot read file" in e["error"]
        assert "not the model's fault" in shared.stdout
        assert not [k for k in s3.keys("thumbs") if k.startswith(("thumbs/", "by-sha256/"))]

        there = _farm(s3, hidden, *args, env=env)  # --inputs auto: they travel through the bucket
        assert there.returncode == 0, there.stdout + there.stderr + log.read_text()[-4000:]
    finally:
        _stop(worker)
    assert f"{len(here)} models: {len(here)} rendered" in there.stdout  # the input failures were tried again
    index = json.loads(s3.get("thumbs/index.json"))
    keys = set(s3.keys("thumbs"))
    assert any(k.startswith(".farm/inputs/") for k in keys)
    for e in index["models"]:
        mine = here[e["id"]]
        assert e["status"] == "done" and e["cause"] is None, e
        assert e["image_sha256"] == mine["image_sha256"], json.dumps([e, mine, log.read_text()[-3000:]])  # as here
        assert e["digest_thumbnail"] == mine["digest_thumbnail"] == (
            f"by-sha256/{e['sha256']}-{json.loads(s3.get('thumbs/.farm/state.json'))['models'][e['id']]['options']}"
            ".png")
        assert {e["thumbnail"], e["digest_thumbnail"]} <= keys
        assert s3.get(f"thumbs/{e['digest_thumbnail']}") == s3.get(f"thumbs/{e['thumbnail']}")
        rgba, trace = read_png(hidden / "local" / mine["thumbnail"])
        assert trace["model_hash"] == e["sha256"]
    assert "Traceback" not in log.read_text()
