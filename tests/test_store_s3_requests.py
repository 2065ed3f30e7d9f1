"""What the S3 store asks of the server (issue 33 item 3), counted on this process's boto3 client
(a `before-send` hook: every request that leaves, retries included) against moto_server on loopback:

- a 48-frame batch costs at most 1.5 requests a frame: one conditional PUT of each image
  (`If-None-Match: *`, never a HEAD first) and a few coalesced writes of the batch result, which
  read nothing back while no one else wrote it;
- one client per process, reused by every store and batch opened in it;
- after a run with no goldens, the coordinator's hint reads no image and no sidecar object (one
  batch result a batch).
"""

from __future__ import annotations

import collections
import hashlib
from pathlib import Path

import pytest
from s3server import BUCKET, MOTO

pytest_plugins = ("s3server",)  # its fixtures: s3, store_env

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(MOTO).exists(), reason="moto_server is not installed"
                                                   " (pip install 'moto[server]')")]


class Requests:
    """The requests a client sends, as (method, what) with `what` the kind of object."""

    def __init__(self, client):
        self.sent: list[tuple[str, str, dict]] = []
        client.meta.events.register("before-send.s3", self._sent)
        self.client = client

    def _sent(self, request, **kw):
        self.sent.append((request.method, request.url, {k.lower(): v.decode() if isinstance(v, bytes) else v
                                                        for k, v in request.headers.items()}))

    def close(self):
        self.client.meta.events.unregister("before-send.s3", self._sent)

    def kinds(self) -> collections.Counter:
        def what(url: str) -> str:
            for part, name in (("?list", "list"), ("/images/", "image"), ("/batches/", "batch result"),
                               ("/attempts/", "delivery"), ("/inputs/", "input")):
                if part in url:
                    return name
            return "other"
        return collections.Counter((m, what(u)) for m, u, _ in self.sent)


def _batch(tmp_path: Path, frames: int):
    from farm.plan.batches import Batch
    from renderer.samples import write_samples

    model = write_samples(tmp_path / "m")[0]
    times = list(range(0, 10 * frames, 10))
    return Batch(str(model), "m/crate.mdx", hashlib.sha256(model.read_bytes()).hexdigest(), 0, "Stand", times,
                 [f"k{t}" for t in times])


def _counted(store):
    return Requests(store.client)


def test_a_batch_costs_at_most_one_and_a_half_requests_a_frame(store_env, tmp_path, monkeypatch):
    from farm.run.execute import render_batch
    from farm.run.worker import SyntheticRenderer
    from farm.store import open_store

    monkeypatch.setenv("FARM_INPUTS", "shared")
    store = open_store(f"s3://{BUCKET}/requests")
    batch = _batch(tmp_path, 48)
    seen = _counted(store)
    try:
        result = render_batch(batch, SyntheticRenderer, store, "job")
    finally:
        seen.close()
    assert [f.status for f in result.frames] == ["done"] * 48
    kinds = seen.kinds()
    images = [h for m, u, h in seen.sent if m == "PUT" and "/images/" in u]
    assert len(images) == len({f.digest for f in result.frames}) == kinds["PUT", "image"]  # each image once
    assert all(h.get("if-none-match") == "*" for h in images), "an image written other than once, conditionally"
    assert kinds["HEAD", "image"] == 0 and kinds["PUT", "other"] == 0  # no look first, no sidecar object
    assert kinds["GET", "batch result"] == 0, kinds  # merges from the result this store wrote last
    assert sum(kinds.values()) <= 1.5 * 48, kinds
    stored = store.read_batch_result("job", batch.id)
    assert [f["status"] for f in stored["frames"]] == ["done"] * 48
    assert all(f["sidecar"]["digest"] == f["digest"] for f in stored["frames"])  # the sidecar in the result


def test_one_client_per_process_reused_by_every_store_and_batch(store_env, tmp_path, monkeypatch):
    from farm.run.execute import render_batch
    from farm.run.worker import SyntheticRenderer
    from farm.store import open_store
    from farm.store import s3 as s3_store

    made = []
    real = s3_store._make_client
    monkeypatch.setattr(s3_store, "_CLIENTS", {})
    monkeypatch.setattr(s3_store, "_make_client", lambda: made.append(1) or real())
    monkeypatch.setenv("FARM_INPUTS", "shared")
    batch = _batch(tmp_path, 2)
    stores = [open_store(f"s3://{BUCKET}/clients") for _ in range(3)]
    for i, store in enumerate(stores):
        render_batch(batch, SyntheticRenderer, store, f"job{i}")
    assert len(made) == 1 and len({id(s.client) for s in stores}) == 1


def test_the_hint_after_a_run_without_goldens_reads_no_image_or_sidecar(store_env, tmp_path, monkeypatch):
    import subprocess
    import sys

    from farm.flows.pipeline import compare_job
    from farm.run.jobs import JobState
    from renderer.samples import write_samples

    write_samples(tmp_path / "models")
    m = tmp_path / "job.toml"
    m.write_text('name = "hint"\nsize = "8x8"\ntimestamps = [0, 100, 200, 300]\n'
                 '[[models]]\npaths = ["models/crate.mdx", "models/filter_modes.mdx"]\n')
    env = {**store_env.env, "FARM_RENDERER": "synthetic"}
    url = f"s3://{BUCKET}/hint"
    r = subprocess.run([sys.executable, "-m", "farm", "run", str(m), "--out", url, "--job-id", "h", "--no-compare",
                        "--no-progress"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    job = JobState.load("h", url)
    seen = _counted(job.store)
    try:
        done = compare_job(job)
    finally:
        seen.close()
    assert done.status is None and done.first is not None and len(done.first["traces"]) == len(job.traces) >= 8
    kinds = seen.kinds()
    assert kinds["GET", "image"] == 0 and kinds["HEAD", "image"] == 0, kinds  # no image, no sidecar object
    assert kinds["GET", "batch result"] <= len({t["batch"] for t in job.traces.values()}), kinds
