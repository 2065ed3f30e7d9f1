"""What every store kind keeps, for each kind: the folder store, the in-memory store (mem://) and
the S3 store against a real S3-protocol server (moto_server on loopback, tests/s3server.py).

One domain layer (farm.store.domain) over each kind's primitives: batch results merged by many
writers lose no frame; delivery counts from many writers all count; images and inputs are
written once; the log comes back in order; a damaged document is one sentence naming it; frame
fields of a newer worker pass through an older reader; the mirror's lock is a lease (a killed
holder's lock is taken over, a live one refused). URLs of unknown schemes are refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from s3server import BUCKET, MOTO

import farm.store
from farm.store import is_url, open_store, split_job_url
from farm.store.documents import StoreError

pytest_plugins = ("s3server",)  # its fixtures: s3, store_env

ROOT = Path(__file__).resolve().parents[1]
KINDS = ["folder", "mem", pytest.param("s3", marks=[pytest.mark.slow, pytest.mark.skipif(
    not Path(MOTO).exists(), reason="moto_server is not installed (pip install 'moto[server]')")])]
PROCESS_KINDS = [k for k in KINDS if getattr(k, "values", (k,))[0] != "mem"]  # mem:// lives in one process


def _location(kind: str, request, tmp_path: Path) -> str:
    name = uuid.uuid4().hex[:12]
    if kind == "folder":
        return str(tmp_path / "store")
    if kind == "mem":
        return f"mem://{name}"
    request.getfixturevalue("store_env")
    return f"s3://{BUCKET}/{name}"


@pytest.fixture(params=KINDS)
def store(request, tmp_path):
    return open_store(_location(request.param, request, tmp_path))


@pytest.fixture(params=PROCESS_KINDS)
def shared_store(request, tmp_path):
    """A store of a kind that other processes can open too."""
    return open_store(_location(request.param, request, tmp_path))


def _frame(t: int, **kw) -> dict:
    return {"key": f"m|Stand|{t}", "time_ms": t, "status": "done", "digest": "0" * 64, **kw}



def test_a_merge_from_the_result_a_store_wrote_last_loses_no_frame_another_wrote_since(store):
    one, other = store, open_store(store.location)
    one.write_batch_result("j", {"batch": "b", "frames": [_frame(1)]})  # remembered with its tag
    other.write_batch_result("j", {"batch": "b", "frames": [_frame(2)]})  # the remembered tag is stale now
    merged = one.write_batch_result("j", {"batch": "b", "frames": [_frame(3)]})
    assert [f["key"] for f in merged["frames"]] == [_frame(t)["key"] for t in (1, 2, 3)]
    assert store.read_batch_result("j", "b") == merged
    one.record_frames("j", {"batch": "b", "frames": [_frame(4)]})  # along the way (background on S3)
    final = one.write_batch_result("j", {"batch": "b", "frames": [_frame(5)]})  # waits for it
    assert [f["time_ms"] for f in final["frames"]] == [1, 2, 3, 4, 5] == \
        [f["time_ms"] for f in open_store(store.location).read_batch_result("j", "b")["frames"]]

def test_batch_results_merged_by_many_writers_lose_no_frame(store):
    frames = [_frame(t) for t in range(24)]

    def write(f):
        return open_store(store.location).write_batch_result("j", {"batch": "b1", "frames": [f]})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, frames))
    stored = store.read_batch_result("j", "b1")
    assert json.loads(store.objects.get(store.batch_ref("j", "b1"))) == stored  # the object itself
    assert sorted(f["key"] for f in stored["frames"]) == sorted(f["key"] for f in frames)
    late = store.write_batch_result("j", {"batch": "b1", "frames": [{**frames[0], "status": "failed",
                                                                      "digest": None, "error": "late"}]})
    assert next(f for f in late["frames"] if f["key"] == frames[0]["key"])["status"] == "done"
    store.remove_batch_result("j", "b1")
    assert store.read_batch_result("j", "b1") is None


def test_delivery_counts_from_many_threads_all_count(store):
    with ThreadPoolExecutor(6) as pool:
        assert sorted(pool.map(lambda _: store.begin_batch("j", "b") > 0, range(6))) == [True] * 6
    assert store.deliveries("j", "b") == 6
    store.end_batch("j", "b")
    assert store.unfinished("j", "b") == [(store.unfinished("j", "b")[0][0], os.getpid())] * 5
    store.reset_batch("j", "b")
    assert store.deliveries("j", "b") == 0 and store.unfinished("j", "b") == []


def test_delivery_counts_from_many_processes_all_count(shared_store):
    store = shared_store
    code = (f"from farm.store import open_store; s = open_store({store.location!r}); s.begin_batch('j', 'b');"
            f" s.end_batch('j', 'b') if __import__('os').getpid() % 2 else None")
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=os.environ.copy()) for _ in range(6)]
    pids = {p.pid for p in procs}
    assert [p.wait(60) for p in procs] == [0] * 6
    assert store.deliveries("j", "b") == 6
    assert sorted(pid for _, pid in store.unfinished("j", "b")) == sorted(pid for pid in pids if pid % 2 == 0)
    store.reset_batch("j", "b")
    assert store.deliveries("j", "b") == 0 and store.unfinished("j", "b") == []


def test_a_delivery_of_this_process_is_never_its_own_death_whatever_the_host_name(store, monkeypatch):
    """Each store notes who began a delivery (farm.store.base.delivery_owner) as the worker looks
    itself up (farm.run.execute: `deaths`), also on a host whose name has a space."""
    from farm.plan.batches import Batch
    from farm.run.execute import FRAMES

    monkeypatch.setattr(socket, "gethostname", lambda: "build box")
    batch = Batch("/m/crate.mdx", "crate.mdx", None, "Stand", "Stand", [0], ["k"], id="b")
    store.begin_batch("j", "b")
    assert store.unfinished("j", "b") == [("build_box", os.getpid())]
    assert FRAMES.deaths(store, "j", batch) == 0  # the one unfinished delivery is this one


def test_images_and_inputs_are_written_once_and_read_back_whole(store):
    writes = []
    put_if_absent = store.objects.put_if_absent
    store.objects.put_if_absent = lambda key, data: writes.append(key) or put_if_absent(key, data)
    png = b"\x89PNG not really" * 10
    digest = store.put_image(png)
    assert store.put_image(png) == digest == hashlib.sha256(png).hexdigest()
    store.flush()
    assert writes == [store.image_ref(digest)] * 2  # one conditional write each, no look first
    assert store.read_image(digest) == png and store.local_path(store.image_ref(digest)).read_bytes() == png
    data = b"texture bytes " * 100
    sha = store.put_input(data)
    assert store.read_input(sha) == data
    store.objects.put(f"inputs/{sha[:2]}/{sha}", data[:10])  # written over by something else
    with pytest.raises(StoreError, match=f"{store.location}/inputs/{sha[:2]}/{sha}: the input's bytes"):
        store.read_input(sha)


def test_an_old_sidecar_object_is_still_read(store):
    digest = store.put_image(b"png", {"trace": {"gl": {"renderer": "x"}}})
    store.flush()
    assert store.read_sidecar(digest) == {"digest": digest, "bytes": 3, "trace": {"gl": {"renderer": "x"}}}


def test_job_documents_index_artefacts_and_removal(store):
    assert store.job_ids() == [] and not store.has_job("a") and store.job_time("a") is None
    before = time.time() - 5
    store.write_job("a", {"format": "modelfarm.job/1", "job": "a", "traces": {}, "batches": {}})
    store.write_index("a", {"k2": "d2", "k1": "d1"})
    store.append_job_log("a", {"seq": 1, "traces": {}})
    ref = store.put_artefact("a", "heatmaps/x.png", b"heat")
    assert store.job_ids() == ["a"] and store.has_job("a") and before < store.job_time("a") < time.time() + 5
    assert store.read_job("a")["job"] == "a" and list(store.read_index("a")) == ["k1", "k2"]
    assert store.read_artefact("a", "heatmaps/x.png") == b"heat" and store.local_path(ref).read_bytes() == b"heat"
    assert store.read_artefact("a", "nothing") is None and store.local_path("jobs/a/nothing") is None
    with pytest.raises(ValueError, match="leaves the job's folder"):
        store.put_artefact("a", "../b.json", b"")
    assert store.job_location("a") == f"{store.location}/jobs/a.json"
    store.remove_job("a")
    assert store.job_ids() == [] and not store.has_job("a") and store.read_job_log("a") == []
    assert store.read_artefact("a", "heatmaps/x.png") is None


def test_loading_a_job_reads_only_the_log_records_its_document_lacks(store):
    """The job document says up to which log record it holds (``log``); a store of objects lists the
    log and reads only the later records; a folder reads its one log file."""
    from farm.run.jobs import JobState

    key = "models/a.mdx|Stand|0ms|auto|8x8|msaa0|team0|transparent"
    trace = {"model": "models/a.mdx", "batch": "b1", "status": "pending", "digest": None, "error": None, "attempts": 0}
    for seq in range(1, 6):
        store.append_job_log("j", {"seq": seq, "traces": {key: {**trace, "status": "done", "digest": f"{seq:064x}"}}})
    store.write_job("j", {"format": "modelfarm.job/1", "job": "j", "log": 3, "runs": [], "batches": {},
                          "traces": {key: {**trace, "status": "done", "digest": f"{3:064x}"}}})
    fetched = []
    get = store.objects.get
    store.objects.get = lambda key: fetched.append(key) or get(key)
    job = JobState.load("j", store)
    assert job.traces[key]["digest"] == f"{5:064x}"  # the later records applied, in order
    logs = [k for k in fetched if "/log" in k]
    if store.kind == "folder":
        assert logs == [] and len(store.read_job_log("j")) == 5  # one file, read whole
    else:
        assert sorted(int(k.rsplit("/", 1)[1][:12]) for k in logs) == [4, 5]


def test_a_whole_document_written_at_a_runs_end_leaves_no_log_to_parse_again(store):
    """When the document is written whole (the end of a run), the log records it holds are dropped:
    a million-frame job's `farm status` parses its document, not a second copy of every change."""
    from farm.run.jobs import JobState

    key = "models/a.mdx|Stand|0ms|auto|8x8|msaa0|team0|transparent"
    trace = {"model": "models/a.mdx", "batch": "b1", "status": "pending", "digest": None, "error": None, "attempts": 0}
    store.write_job("j", {"format": "modelfarm.job/1", "job": "j", "runs": [], "batches": {}, "traces": {key: trace}})
    job = JobState.load("j", store)
    for n in range(3):
        job.traces[key].update(status="done", digest=f"{n:064x}")
        job._dirty.add(key)
        job.save()
    assert len(store.read_job_log("j")) == 3 and JobState.load("j", store).traces[key]["digest"] == f"{2:064x}"
    job.save(force=True)
    assert store.read_job_log("j") == [] and store.read_job("j")["log"] == 3
    job.traces[key]["error"] = "later"
    job._dirty.add(key)
    job.save()  # numbered after what the document holds
    assert [r["seq"] for r in store.read_job_log("j")] == [4]
    again = JobState.load("j", store)
    assert again.traces[key]["digest"] == f"{2:064x}" and again.traces[key]["error"] == "later"


def test_a_damaged_document_is_one_sentence_naming_it(store):
    from farm.run.jobs import JobError, JobState

    loc = store.location
    store.write_job("j", {"format": "modelfarm.job/1", "job": "j", "traces": {}, "batches": {}})
    store.append_job_log("j", {"seq": 1, "traces": {}})
    if store.kind != "folder":  # a folder's log is one file: a torn line is tested in test_job_state.py
        store.objects.put("jobs/j/log/000000000002-x.json", b'{"seq": 2, "tr')
        with pytest.raises(JobError, match=rf"the log of job 'j' is damaged: {loc}/jobs/j/log/000000000002-x.json:"
                                           r" not valid JSON"):
            JobState.load("j", store)
    store.objects.put("jobs/k.json", b"[1, 2")
    with pytest.raises(StoreError, match=rf"{loc}/jobs/k.json is not valid JSON"):
        store.read_job("k")
    store.objects.put("jobs/k/batches/b.json", b"[]")
    with pytest.raises(StoreError, match=rf"{loc}/jobs/k/batches/b.json: a batch result is a JSON object, not an"
                                         r" array"):
        store.read_batch_result("k", "b")


def test_an_older_reader_keeps_the_fields_of_a_newer_workers_result(store):
    """A rolling upgrade: a newer worker adds a field to its frames; this (older) reader checks the
    result, reads it, merges a later delivery into it and writes it back: the field is kept."""
    from farm.run.execute import BatchResult

    newer = {"batch": "b", "frames": [_frame(0, gpu_ms=3.5, trace_v2={"x": 1}), _frame(1, status="failed",
                                                                                       digest=None, error="e")]}
    store.objects.put(store.batch_ref("j", "b"), json.dumps(newer).encode())
    read = store.read_batch_result("j", "b")
    assert read == newer
    result = BatchResult.from_dict(read)
    assert result.frames[0].extra == {"gpu_ms": 3.5, "trace_v2": {"x": 1}}
    assert result.to_dict()["frames"][0] == {**newer["frames"][0], "error": None}
    merged = store.write_batch_result("j", {"batch": "b", "frames": [_frame(1)]})  # an older worker's redelivery
    assert merged["frames"][0] == newer["frames"][0] and merged["frames"][1]["status"] == "done"
    assert store.read_batch_result("j", "b")["frames"][0]["gpu_ms"] == 3.5
    with pytest.raises(StoreError, match=r"frames\[0\] 'time_ms' must be an integer, not a string"):
        store.objects.put(store.batch_ref("j", "c"), json.dumps({"batch": "c", "frames": [_frame("x")]}).encode())
        store.read_batch_result("j", "c")


def test_a_url_of_an_unknown_scheme_is_refused_not_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=r"'ftp://x/y': no store kind for ftp:// \(known: file://, s3://, mem://"):
        open_store("ftp://x/y")
    assert not (tmp_path / "ftp:").exists()
    assert is_url("s3://b/p") and is_url("mem://x") and not is_url("ftp://x/y") and not is_url("a/b")
    assert split_job_url("mem://x/p/jobs/j1.json") == ("mem://x/p", "j1")
    assert split_job_url("s3://b/jobs/j1.json") == ("s3://b", "j1") and split_job_url("ftp://b/jobs/j.json") is None
    assert open_store(f"file://{tmp_path}/f").location == str(tmp_path / "f")
    # a kind registered after import, with an empty host (``sqlite:///path``): its job URLs split too
    monkeypatch.setitem(farm.store.KINDS, "sqlite", "farm.store.mem:open_mem")
    assert split_job_url("sqlite:///var/farm.db/jobs/j2.json") == ("sqlite:///var/farm.db", "j2")


# --- the mirror's lock (farm thumbnails -o URL): a lease


def test_a_live_lock_is_refused_and_renewed_while_held(store, capsys):
    from farm.store.mirror import TreeMirror

    first = TreeMirror(store, lease_s=0.4)
    first.hold()
    held = json.loads(store.objects.get(TreeMirror.LOCK))
    time.sleep(1.0)  # past the lease: renewed meanwhile
    renewed = json.loads(store.objects.get(TreeMirror.LOCK))
    assert renewed["token"] == held["token"] and renewed["renewed"] > held["renewed"]
    with pytest.raises(StoreError, match="another command is writing"):
        TreeMirror(open_store(store.location), lease_s=0.4).hold()
    first.release()
    with pytest.raises(FileNotFoundError):
        store.objects.get(TreeMirror.LOCK)
    second = TreeMirror(store)
    second.hold()
    second.release()
    assert capsys.readouterr().err == ""  # nothing was taken over


def test_a_stale_lock_is_taken_over_saying_so_a_fresh_one_of_another_host_is_refused(store, capsys):
    from farm.store.mirror import TreeMirror

    lock = {"host": "elsewhere", "pid": 4242, "token": "t", "lease_s": 60}
    store.objects.put(TreeMirror.LOCK, json.dumps({**lock, "renewed": time.time()}).encode())
    with pytest.raises(StoreError, match="another command is writing .* for elsewhere pid 4242"):
        TreeMirror(store).hold()
    store.objects.put(TreeMirror.LOCK, json.dumps({**lock, "renewed": time.time() - 61}).encode())
    mirror = TreeMirror(store)
    mirror.hold()
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"took over the stale lock {store.location}/.farm/lock of elsewhere pid 4242: not renewed"
                           " for 61 s (lease 60 s)"), line
    assert json.loads(store.objects.get(TreeMirror.LOCK))["pid"] == os.getpid()
    mirror.release()


def test_a_lock_held_by_a_killed_process_is_taken_over(shared_store, tmp_path, capsys):
    """kill -9 of a command holding the lock: the next one takes it over (its holder's process no
    longer runs on this host) with one line, instead of refusing forever."""
    from farm.store.mirror import TreeMirror

    code = ("import sys, time; from farm.store import open_store; from farm.store.mirror import TreeMirror;"
            f" TreeMirror(open_store({shared_store.location!r})).hold(); print('held', flush=True); time.sleep(600)")
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=os.environ.copy(), stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreError, match=f"another command is writing .* pid {holder.pid}"):
            TreeMirror(shared_store).hold()  # alive: refused
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
    mirror = TreeMirror(shared_store)
    mirror.hold()
    (line,) = capsys.readouterr().err.splitlines()
    assert f"took over the stale lock {shared_store.location}/.farm/lock of " in line
    assert line.endswith(f"pid {holder.pid}: process {holder.pid} on {socket.gethostname()} no longer runs")
    mirror.release()


def test_two_commands_taking_over_one_stale_lock_cannot_both_win(store):
    from farm.store.mirror import TreeMirror

    store.objects.put(TreeMirror.LOCK, json.dumps({"host": "elsewhere", "pid": 1, "renewed": 0, "lease_s": 1}).encode())
    mirrors = [TreeMirror(open_store(store.location)) for _ in range(4)]

    def take(m):
        try:
            m.hold()
            return True
        except StoreError:
            return False

    with ThreadPoolExecutor(4) as pool:
        won = list(pool.map(take, mirrors))
    assert won.count(True) == 1
    next(m for m, w in zip(mirrors, won, strict=True) if w).release()
