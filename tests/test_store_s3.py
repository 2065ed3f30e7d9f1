"""The S3 store (farm.store.s3) against a real S3-protocol server: `moto_server` on a spare loopback
port, started and stopped here, reached through a small TCP proxy the tests can cut (moto keeps its
objects in memory, so stopping the server would lose them; cutting the proxy is the store being
unreachable while its data lives on).

- `farm run --out s3://...` of the sample models, then status (by id and by the job's URL), retry,
  approve into a goldens folder, compare, report (the images copied out of the bucket) and diff
  against a folder run of the same manifest (no change; the two stores hold the same frames);
- the store unreachable for 3 s in the middle of a job: retried, the job ends with every frame;
  unreachable for good: one sentence naming the endpoint, not a traceback;
- an interrupted PUT and an unfinished multipart upload of a job document are never read;
- two coordinators on one prefix: distinct jobs, one copy of each image.

What every kind keeps (merges, delivery counts, the log, damaged documents, the mirror's lock) is
tested for the folder, the in-memory and this store alike in tests/test_store.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from s3server import BUCKET, MOTO, S3, _free_port

pytest_plugins = ("s3server",)  # its fixtures: s3, store_env

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path(MOTO).exists(), reason="moto_server is not installed"
                                                   " (pip install 'moto[server]')")]


def _farm(s3: S3, cwd: Path, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "farm", *args], cwd=cwd, env=env or s3.env, capture_output=True,
                          text=True, timeout=timeout)


def _manifest(tmp: Path, timestamps: str = "[0, 333]", size: str = "24x24") -> Path:
    from renderer.samples import write_samples

    write_samples(tmp / "models")
    m = tmp / "job.toml"
    m.write_text(f'name = "s3"\nsize = "{size}"\ntimestamps = {timestamps}\n'
                 '[[models]]\npaths = ["models/crate.mdx", "models/filter_modes.mdx"]\n')
    return m


def _job(s3: S3, prefix: str, job_id: str) -> dict:
    return json.loads(s3.get(f"{prefix}/jobs/{job_id}.json"))


def _index(s3: S3, prefix: str, job_id: str) -> dict:
    return json.loads(s3.get(f"{prefix}/jobs/{job_id}/index.json"))


def _images_whole(s3: S3, prefix: str, digests) -> None:
    for d in digests:
        assert hashlib.sha256(s3.get(f"{prefix}/images/{d[:2]}/{d}.png")).hexdigest() == d


def test_run_status_retry_approve_compare_report_and_diff_on_s3(s3, tmp_path):
    m = _manifest(tmp_path)
    url = f"s3://{BUCKET}/cli/runs"
    r = _farm(s3, tmp_path, "run", str(m), "--out", url, "--job-id", "one", "--no-compare", "--no-progress",
              "--workers", "2")
    assert r.returncode == 0, r.stderr
    job = _job(s3, "cli/runs", "one")
    assert {t["status"] for t in job["traces"].values()} == {"done"} and len(job["traces"]) >= 4
    index = _index(s3, "cli/runs", "one")
    assert sorted(index) == sorted(job["traces"])
    _images_whole(s3, "cli/runs", index.values())

    for ref in (["one", "--out", url], [f"{url}/jobs/one.json"], ["latest", "--out", url]):
        r = _farm(s3, tmp_path, "status", *ref, "--json")
        assert r.returncode == 0, r.stderr
        status = json.loads(r.stdout)
        assert status["job"] == "one" and status["store"] == url and status["done"] == len(job["traces"])
    r = _farm(s3, tmp_path, "retry", f"{url}/jobs/one.json", "--failed", "--pending", "--no-progress")
    assert r.returncode == 0, r.stderr

    goldens = tmp_path / "goldens"
    r = _farm(s3, tmp_path, "approve", "one", "--out", url, "--goldens", str(goldens), "--all", "--yes")
    assert r.returncode == 0, r.stderr
    for d in set(index.values()):  # the goldens are a folder: the approved images copied out of the bucket
        assert hashlib.sha256((goldens / "images" / f"{d}.png").read_bytes()).hexdigest() == d
    from farm.goldens.index import LOG_NAME

    log = [json.loads(line) for line in (goldens / LOG_NAME).read_text().splitlines()]
    assert log[-1]["store"] == url
    r = _farm(s3, tmp_path, "compare", f"{url}/jobs/one.json", "--goldens", str(goldens), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["counts"]["pass"] == len(job["traces"])
    assert "comparison.json" in s3.keys("cli/runs/jobs/one")

    report = tmp_path / "report"
    r = _farm(s3, tmp_path, "report", "one", "--out", url, "--goldens", str(goldens), "-o", str(report))
    assert r.returncode == 0, r.stderr
    copied = {hashlib.sha256(p.read_bytes()).hexdigest() for p in report.rglob("*.png")}
    assert set(index.values()) <= copied  # the run's frames, copied out of the bucket into the report

    folder = tmp_path / "folder-out"
    r = _farm(s3, tmp_path, "run", str(m), "--out", str(folder), "--job-id", "two", "--no-compare", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert json.loads((folder / "jobs" / "two" / "index.json").read_text()) == index  # same frames, same bytes
    r = _farm(s3, tmp_path, "diff", f"{url}/jobs/one.json", str(folder / "jobs" / "two.json"), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    r = _farm(s3, tmp_path, "diff", "two", "one", "--base-out", str(folder), "--head-out", url, "-o",
              str(tmp_path / "diff-report"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "diff-two.json" in s3.keys("cli/runs/jobs/one")


def _synthetic_env(s3: S3, **extra) -> dict:
    return {**s3.env, "FARM_RENDERER": "synthetic", "FARM_SYNTHETIC_DELAY_MS": "150", **extra}


def test_the_store_unreachable_for_seconds_mid_job_loses_nothing(s3, tmp_path):
    m = _manifest(tmp_path, "[0, 100, 200, 300, 400, 500, 600, 700, 800, 900]", "16x16")
    env = _synthetic_env(s3)
    prefix = "outage"
    p = subprocess.Popen([sys.executable, "-m", "farm", "run", str(m), "--out", f"s3://{BUCKET}/{prefix}", "--job-id",
                          "cut", "--no-compare", "--no-progress", "--workers", "2"], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(k.startswith("images/") and k.endswith(".png") for k in s3.keys(prefix)):
        assert p.poll() is None and time.monotonic() < deadline, "no frame stored before the outage"
        time.sleep(0.1)
    stored_before = sum(k.endswith(".png") for k in s3.keys(prefix))
    s3.proxy.cut()
    down = time.monotonic()
    time.sleep(8)  # longer than botocore's retry quota lasted (one client a process, 16 requests in flight)
    s3.proxy.restore()
    outs, errs = p.communicate(timeout=300)
    print(f"\nS3 unreachable 8 s: {s3.proxy.refused} connection(s) reset; the job ended"
          f" {time.monotonic() - down:.1f} s after the cut")
    assert s3.proxy.refused > 0, "the outage met no request: it tested nothing"
    assert p.returncode == 0, (outs, errs)
    assert "Traceback" not in errs
    job = _job(s3, prefix, "cut")
    assert {t["status"] for t in job["traces"].values()} == {"done"} and len(job["traces"]) >= 20
    index = _index(s3, prefix, "cut")
    assert sorted(index) == sorted(job["traces"]) and len(set(index.values())) > stored_before
    _images_whole(s3, prefix, index.values())

    folder = tmp_path / "folder"  # the same job into a folder: the same frames
    r = subprocess.run([sys.executable, "-m", "farm", "run", str(m), "--out", str(folder), "--job-id", "cut",
                        "--no-compare", "--no-progress"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads((folder / "jobs" / "cut" / "index.json").read_text()) == index


def test_an_unreachable_store_is_one_sentence(s3, tmp_path):
    env = {**s3.env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{_free_port()}", "AWS_MAX_ATTEMPTS": "2"}
    r = _farm(s3, tmp_path, "status", "x", "--out", f"s3://{BUCKET}/nowhere", env=env)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "did not answer after 2 attempts" in lines[0] and env["AWS_ENDPOINT_URL"] in lines[0], \
        r.stderr
    r = _farm(s3, tmp_path, "status", "x", "--out", "s3://no-such-bucket-here/p")
    assert r.returncode != 0 and "bucket 'no-such-bucket-here' does not exist" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def _raw_put(port: int, key: str, body: bytes, send: int) -> None:
    """A PUT of `body` cut off after `send` bytes (the connection dropped mid-upload)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(f"PUT /{BUCKET}/{key} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n"
                  f"\r\n".encode() + body[:send])
        time.sleep(0.3)


def test_a_half_uploaded_document_is_never_read(store_env, tmp_path):
    from farm.store import open_store

    s3 = store_env
    store = open_store(f"s3://{BUCKET}/half")
    doc = {"format": "modelfarm.job/1", "job": "j", "traces": {}, "batches": {}}
    store.write_job("j", doc)
    assert json.loads(s3.get("half/jobs/j.json")) == doc  # an object in the bucket
    new = json.dumps({**doc, "name": "x" * 20000}).encode()
    _raw_put(s3.port, "half/jobs/j.json", new, len(new) // 2)  # an interrupted PUT
    up = s3.client.create_multipart_upload(Bucket=BUCKET, Key="half/jobs/j.json")  # a multipart never completed
    s3.client.upload_part(Bucket=BUCKET, Key="half/jobs/j.json", UploadId=up["UploadId"], PartNumber=1,
                          Body=new[: len(new) // 2])
    assert store.read_job("j") == doc
    _raw_put(s3.port, "half/jobs/k.json", new, len(new) // 2)  # a first upload cut off: no document at all
    assert not store.has_job("k") and store.job_ids() == ["j"]
    with pytest.raises(FileNotFoundError):
        store.read_job("k")


def test_a_travelling_input_is_read_whole_or_refused(store_env, tmp_path, monkeypatch):
    """An input object cut off mid-upload is never there; one whose bytes are not its sha256 (written
    over by something else) is refused in one sentence naming its URL; a worker given it fails those
    frames with that sentence, and the job goes on."""
    from farm.plan.batches import Batch
    from farm.run.execute import render_batch
    from farm.run.inputs import publish
    from farm.run.worker import SyntheticRenderer
    from farm.store import open_store
    from farm.store.documents import StoreError

    s3 = store_env
    store = open_store(f"s3://{BUCKET}/inputs-half")
    data = b"texture bytes " * 4000
    sha = hashlib.sha256(data).hexdigest()
    _raw_put(s3.port, f"inputs-half/inputs/{sha[:2]}/{sha}", data, len(data) // 2)
    with pytest.raises(FileNotFoundError):
        store.read_input(sha)
    assert store.put_input(data) == sha and store.read_input(sha) == data
    s3.client.put_object(Bucket=BUCKET, Key=f"inputs-half/inputs/{sha[:2]}/{sha}", Body=data[:100])
    with pytest.raises(StoreError, match=f"s3://{BUCKET}/inputs-half/inputs/{sha[:2]}/{sha}: the input's bytes"):
        store.read_input(sha)

    from renderer.samples import write_samples

    model = write_samples(tmp_path / "m")[0]
    batch = Batch(str(model), "m/crate.mdx", hashlib.sha256(model.read_bytes()).hexdigest(), 0, "Stand", [0],
                  ["k0"])
    publish([batch], store)
    doc = json.loads(store.read_input(batch.inputs))
    s3.client.put_object(Bucket=BUCKET, Key=f"inputs-half/inputs/{doc['model'][:2]}/{doc['model']}", Body=b"MDLX")
    monkeypatch.setenv("FARM_INPUT_CACHE", str(tmp_path / "cache"))
    result = render_batch(batch, SyntheticRenderer, store, "job")
    (frame,) = result.frames
    assert frame.status == "failed" and "the input's bytes do not have its sha256" in frame.error, frame.error


def test_two_coordinators_share_a_prefix(s3, tmp_path):
    m = _manifest(tmp_path, "[0, 100, 200]", "16x16")
    env = _synthetic_env(s3, FARM_SYNTHETIC_DELAY_MS="20")
    url = f"s3://{BUCKET}/shared"
    procs = [subprocess.Popen([sys.executable, "-m", "farm", "run", str(m), "--out", url, "--no-compare",
                               "--no-progress", "--workers", "1", "--json"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    ids = sorted(k[len("jobs/"):-len(".json")] for k in s3.keys("shared") if k.count("/") == 1
                 and k.startswith("jobs/") and k.endswith(".json"))
    assert len(ids) == 2 and ids[0] != ids[1]
    indexes = [_index(s3, "shared", i) for i in ids]
    assert indexes[0] == indexes[1] and len(indexes[0]) >= 6
    pngs = [k for k in s3.keys("shared") if k.startswith("images/") and k.endswith(".png")]
    assert sorted(Path(k).stem for k in pngs) == sorted(set(indexes[0].values()))  # one copy of each image
    _images_whole(s3, "shared", indexes[0].values())


def test_farm_out_and_the_project_file_name_an_s3_store(s3, tmp_path):
    from farm.environment import DEFAULT_OUT, default_reports

    env = {**s3.env, "FARM_OUT": f"s3://{BUCKET}/from-env"}
    r = _farm(s3, tmp_path, "status", "nosuch", env=env)
    assert r.returncode != 0 and f"no job 'nosuch' in s3://{BUCKET}/from-env" in r.stderr, r.stderr
    (tmp_path / "farm.toml").write_text(f'store = "s3://{BUCKET}/from-project"\n')
    r = _farm(s3, tmp_path, "status", "nosuch")
    assert r.returncode != 0 and f"no job 'nosuch' in s3://{BUCKET}/from-project" in r.stderr, r.stderr
    # nightly reports are files to publish: with a URL store they stay a local folder
    assert default_reports({"FARM_OUT": f"s3://{BUCKET}/p"}) == str(Path(DEFAULT_OUT) / "nightly")
    assert default_reports({"FARM_OUT": "/srv/out"}) == "/srv/out/nightly"


def test_farm_serve_shows_and_approves_a_run_held_in_s3(s3, tmp_path):
    import re
    import urllib.request

    from farm.goldens import GoldenIndex

    m = _manifest(tmp_path, "[0]", "16x16")
    env = _synthetic_env(s3, FARM_SYNTHETIC_DELAY_MS="0", FARM_SERVE_TOKEN="s3-serve-token", FARM_USER="s3")
    url = f"s3://{BUCKET}/serve"
    r = _farm(s3, tmp_path, "run", str(m), "--out", url, "--job-id", "sv", "--no-compare", "--no-progress", env=env)
    assert r.returncode == 0, r.stderr
    index = _index(s3, "serve", "sv")
    goldens = tmp_path / "goldens"
    proc = subprocess.Popen([sys.executable, "-m", "farm", "serve", "sv", "--out", url, "--goldens", str(goldens),
                             "--port", "0", "--allow-new"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, line + proc.stdout.read() if proc.poll() is not None else line
        base = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        head = {"X-Farm-Token": "s3-serve-token"}
        with urllib.request.urlopen(urllib.request.Request(base, headers=head), timeout=30) as page:
            html = page.read().decode()
        srcs = [s for s in re.findall(r'src="([^"]+\.png)"', html) if not s.startswith("http")]
        assert srcs, html[:2000]
        served = set()
        for src in srcs:
            with urllib.request.urlopen(urllib.request.Request(base + src.lstrip("./"), headers=head),
                                        timeout=30) as img:
                served.add(hashlib.sha256(img.read()).hexdigest())
        assert served == set(index.values())  # the frames, out of the bucket
        key = sorted(index)[0]
        req = urllib.request.Request(base + "api/approve", data=json.dumps({"key": key}).encode(), method="POST",
                                     headers={**head, "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert json.loads(resp.read())["ok"]
    finally:
        proc.terminate()
        proc.wait(10)
    from farm.goldens.index import LOG_NAME

    assert GoldenIndex.load(goldens).entry(key)["approved"][0]["run"] == "sv"
    record = json.loads((goldens / LOG_NAME).read_text().splitlines()[-1])
    assert record["run"] == "sv" and record["store"] == url and record["by"] == "s3"


def test_thumbnails_into_s3_are_incremental_and_drop_what_is_gone(s3, tmp_path):
    from renderer.samples import write_samples

    models = tmp_path / "models"
    write_samples(models)
    env = _synthetic_env(s3, FARM_SYNTHETIC_DELAY_MS="0")
    url = f"s3://{BUCKET}/thumbs"

    def thumbnails() -> subprocess.CompletedProcess:
        r = _farm(s3, tmp_path, "thumbnails", str(models), "-o", url, "--size", "32", "--workers", "1",
                  "--no-progress", env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"-> {url}/index.html" in r.stdout
        return r

    thumbnails()
    keys = s3.keys("thumbs")
    index = json.loads(s3.get("thumbs/index.json"))
    done = [e for e in index["models"] if e["status"] == "done"]
    assert done and "index.html" in keys and ".farm/state.json" in keys and ".farm/lock" not in keys
    for e in done:
        assert e["thumbnail"] in keys
    again = thumbnails()  # the state came back from the bucket: nothing renders twice
    assert f"{len(done)} up to date" in again.stdout or f", {len(done)} up to date" in again.stdout, again.stdout
    gone = next(e for e in done if e["path"].endswith(".mdx"))
    (models / gone["path"]).unlink()
    thumbnails()
    keys = s3.keys("thumbs")
    assert gone["thumbnail"] not in keys
    assert all(e["id"] != gone["id"] for e in json.loads(s3.get("thumbs/index.json"))["models"])


def test_a_celery_worker_elsewhere_renders_into_the_bucket(s3, tmp_path):
    import signal
    import uuid

    from conftest import redis_up, redis_url

    if not redis_up():
        pytest.skip("no Redis for the Celery test (scripts/ensure-redis.sh starts one)")
    tag = uuid.uuid4().hex[:8]
    broker = redis_url(12)
    env = _synthetic_env(s3, FARM_SYNTHETIC_DELAY_MS="0", FARM_BROKER_URL=broker, FARM_RESULT_BACKEND=broker,
                         FARM_QUEUE=f"farm-s3-{tag}", FARM_RETRY_BACKOFF="1")
    elsewhere = tmp_path / "worker-host"  # the worker's own folder: it sees the models, not the client's store
    elsewhere.mkdir()
    log = tmp_path / "worker.log"
    with open(log, "wb") as f:
        worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "farm.celery", "worker", "--pool", "prefork",
                                   "--concurrency", "2", "-n", f"s3-{tag}@%h", "-Q", f"farm-s3-{tag}", "-l", "info",
                                   "--without-mingle", "--without-gossip"], cwd=elsewhere,
                                  env={**env, "PYTHONPATH": str(ROOT)}, stdout=f, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        m = _manifest(tmp_path, "[0, 250, 500]", "16x16")
        r = _farm(s3, tmp_path, "run", str(m), "--out", f"s3://{BUCKET}/celery", "--job-id", "cel", "--broker", broker,
                  "--no-compare", "--no-progress", env=env)
        assert r.returncode == 0, r.stdout + r.stderr + log.read_text()[-3000:]
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
    job = _job(s3, "celery", "cel")
    assert {t["status"] for t in job["traces"].values()} == {"done"}
    _images_whole(s3, "celery", _index(s3, "celery", "cel").values())
    batches = [k for k in s3.keys("celery/jobs/cel") if k.startswith("batches/")]
    assert len(batches) == len(job["batches"])  # each worker's result went to the bucket
    assert list(elsewhere.iterdir()) == [], list(elsewhere.iterdir())  # nothing written on the worker's disk


def test_without_boto3_an_s3_store_is_one_sentence(tmp_path):
    code = ("import sys; sys.modules['boto3'] = sys.modules['botocore'] = None\n"
            "from farm.cli import main\n"
            "sys.exit(main(['status', 'x', '--out', 's3://farm-test/p']))")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "an s3:// store needs boto3, which is not installed: pip install 'modelfarm[s3]'" in r.stderr
    assert not (tmp_path / "s3:").exists()
