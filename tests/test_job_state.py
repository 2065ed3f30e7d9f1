"""The job state's cost and crash safety (issue 23 item 10): recording progress writes what changed
(a log record per result), not the whole document every second; a kill between two writes, a torn
log line or a full disk leaves a readable job (the old state or the new one); a job file written
before the log existed reads as it did.

The coordinator runs for real (`run_job`: planning, the document, recording every result, the end
of the run) into a real folder store; only the workers are stood in for (each batch's frames come
back done at once) and the coordinator's clock runs one second per result, the most ticks a run
can have: every byte the process writes meanwhile is the coordinator's.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from farm.cli import main
from farm.run import jobs
from farm.run.execute import BatchResult, FrameResult
from farm.run.jobs import JobState
from farm.store import FolderStore
from renderer.samples import write_samples

ROOT = Path(__file__).resolve().parents[1]
OLD_JOB = ROOT / "tests" / "data" / "job-format-1"  # written by modelfarm before the log (commit 35c326a)
BROKEN_KEY = "models/broken.mdx|-|0ms|auto|32x32|msaa0|team0|transparent"


def digest_of(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def written() -> int:
    """Bytes this process has passed to write() so far (/proc/self/io)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise AssertionError("/proc/self/io has no wchar")


@pytest.fixture
def models(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no farm.toml above
    write_samples(tmp_path / "models")
    return tmp_path


def manifest(root: Path, every: int) -> Path:
    m = root / f"every{every}.toml"
    m.write_text(f'name = "n"\nsize = "32x32"\nevery = {every}\n[[models]]\npaths = ["models/*.mdx"]\n')
    return m


def simulated_run(root: Path, every: int, monkeypatch) -> tuple[int, JobState]:
    """Run a job with stand-in workers and a clock that moves a second per result; returns the bytes
    the coordinator wrote and the job."""
    clock = [0.0]

    def run_batches(job_id, batches, store, *, on_result, **kw):
        for b in batches:
            clock[0] += 1.0
            on_result(BatchResult(b.id, [FrameResult(k, t, "done", digest=digest_of(k), render_s=0.01)
                                         for t, k in zip(b.times, b.keys, strict=True)]))

    monkeypatch.setattr(jobs, "run_batches", run_batches)
    monkeypatch.setattr(jobs, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    m = manifest(root, every)
    before = written()
    job = jobs.run_job(m, out=root / f"out{every}", broker="local", progress=False)
    return written() - before, job


def test_progress_costs_what_changed(models, monkeypatch):
    """The bytes written for a job's state grow linearly with its frames: two whole documents and a
    log record per result. (0.2 rewrote the document and its index every second: with a result a
    second, 46 whole documents for the 2,006 frames here, 22 for the 1,006.)"""
    small, job_small = simulated_run(models, 10, monkeypatch)
    large, job_large = simulated_run(models, 5, monkeypatch)
    for job in (job_small, job_large):
        assert job.counts()["done"] == job.counts()["total"]
        reread = JobState.load(job.id, job.store.location)
        assert reread.traces == job.traces and reread.data["runs"] == job.data["runs"]
    n_small, n_large = len(job_small.traces), len(job_large.traces)
    assert n_large > 1.8 * n_small and len(job_large.batches) > 40
    store = job_large.store
    whole = len(Path(store.job_location(job_large.id)).read_bytes()) + len(store.index_path(job_large.id).read_bytes())
    assert large < 3 * whole, f"{large:,} bytes written for a {whole:,}-byte job state"
    per_frame_small, per_frame_large = small / n_small, large / n_large
    assert per_frame_large < 1.2 * per_frame_small, (per_frame_small, per_frame_large)


def test_a_job_file_from_before_the_log_reads_as_it_did(tmp_path, capsys):
    store = tmp_path / "store"
    shutil.copytree(OLD_JOB, store)
    raw = json.loads((store / "jobs" / "old-format.json").read_text())
    job = JobState.load("old-format", store)
    assert job.traces == raw["traces"] and job.batches == raw["batches"] and job.data["runs"] == raw["runs"]
    assert job.counts() == {"total": 13, "done": 12, "failed": 1, "pending": 0}
    assert main(["status", "old-format", "--out", str(store), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["done"], out["failed"], out["pending"]) == (12, 1, 0)
    assert "chunk GEOS at byte 20" in out["failed_traces"][BROKEN_KEY]

    # Recording on it appends to the log and leaves the old document as it was; a load sees both.
    document = (store / "jobs" / "old-format.json").read_bytes()
    batch = raw["traces"][BROKEN_KEY]["batch"]
    job.record(BatchResult(batch, [FrameResult(BROKEN_KEY, 0, "done", digest="ab" * 32)]))
    assert (store / "jobs" / "old-format.json").read_bytes() == document
    again = JobState.load("old-format", store)
    assert again.counts() == {"total": 13, "done": 13, "failed": 0, "pending": 0}
    assert again.traces[BROKEN_KEY]["digest"] == "ab" * 32 and again.traces[BROKEN_KEY]["error"] is None
    assert {k: t for k, t in again.traces.items() if k != BROKEN_KEY} == \
        {k: t for k, t in raw["traces"].items() if k != BROKEN_KEY}

    # The end of a run writes the document whole again; it says which log records it holds.
    again.save(force=True)
    compact = json.loads((store / "jobs" / "old-format.json").read_text())
    assert compact["log"] == 1 and compact["traces"] == again.traces
    assert not (store / "jobs" / "old-format" / "log.jsonl").exists()  # what it holds is not parsed again
    assert JobState.load("old-format", store).traces == again.traces


def test_a_torn_log_line_is_left_out_and_cut_off(models, monkeypatch):
    """A process killed in the middle of appending a record leaves part of a line: the job reads as
    before it, and the next record cuts the part off."""
    _, job = simulated_run(models, 50, monkeypatch)
    store: FolderStore = job.store
    before = JobState.load(job.id, store.location).traces
    key = sorted(job.traces)[0]
    line = json.dumps({"seq": 99, "traces": {key: {"status": "failed", "error": "half"}}})
    with open(store.job_log_path(job.id), "ab") as f:
        f.write(line[:len(line) // 2].encode())
    assert JobState.load(job.id, store.location).traces == before
    again = JobState.load(job.id, store.location)
    t = job.traces[key]
    again.record(BatchResult(t["batch"], [FrameResult(key, t["time_ms"], "failed", error="whole")]))
    lines = store.job_log_path(job.id).read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(x) for x in lines[:-1])  # the part is gone
    after = JobState.load(job.id, store.location)
    assert after.traces[key]["status"] == "failed" and after.traces[key]["error"] == "whole"



@pytest.mark.parametrize("record, problem", [
    ({"seq": 99, "traces": {"KEY": 5}}, "trace 'KEY' must be an object, not an integer"),
    ({"seq": 99, "traces": {"KEY": {"status": "bogus"}}}, "trace 'KEY' has status 'bogus', not one of pending,"),
    ({"seq": 99, "batches": [1]}, "'batches' must be an object, not an array"),
    ({"seq": 99, "batches": {"b": "x"}}, "batch 'b' must be an object, not a string"),
    ({"seq": 99, "runs": {}}, "'runs' must be an array, not an object"),
    ({"seq": "99", "traces": {}}, "'seq' must be an integer (the record's number), not a string"),
])
def test_a_log_record_of_the_wrong_shape_is_one_sentence(models, monkeypatch, capsys, record, problem):
    """A damaged log record (changed by hand) stops `farm status` with one sentence naming the job,
    the store, the record and what is wrong, never a TypeError."""
    _, job = simulated_run(models, 50, monkeypatch)
    store: FolderStore = job.store
    key = sorted(job.traces)[0]
    with open(store.job_log_path(job.id), "a", encoding="utf-8") as f:
        f.write(json.dumps(record).replace("KEY", key) + "\n")
    assert main(["status", job.id, "--out", str(store.root)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    where = f"error: the log of job {job.id!r} in {store.location}: record {record['seq']!r}: "
    assert err.startswith(where + problem.replace("KEY", key)), err


@pytest.mark.parametrize("field, value, problem", [
    ("log", "x", "'log' must be an integer (the last log record it holds), not a string"),
    ("runs", {}, "'runs' must be an array, not an object"),
])
def test_a_job_document_whose_log_or_runs_is_of_the_wrong_shape_is_one_sentence(models, monkeypatch, capsys, field,
                                                                                 value, problem):
    _, job = simulated_run(models, 50, monkeypatch)
    store: FolderStore = job.store
    doc = json.loads(store.job_path(job.id).read_text())
    store.job_path(job.id).write_text(json.dumps({**doc, field: value}))
    assert main(["status", job.id, "--out", str(store.root)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {store.job_path(job.id)}: {problem}\n", err

# --- a kill between two writes


KILLED_RUN = textwrap.dedent("""
    import hashlib, sys
    from farm.run import jobs
    from farm.run.execute import BatchResult, FrameResult

    def run_batches(job_id, batches, store, *, on_result, **kw):
        for b in batches:
            on_result(BatchResult(b.id, [FrameResult(k, t, "done", digest=hashlib.sha256(k.encode()).hexdigest())
                                         for t, k in zip(b.times, b.keys, strict=True)]))

    jobs.run_batches = run_batches
    jobs.run_job(sys.argv[1], out=sys.argv[2], broker="local", job_id="k", progress=False)
""")


def traced_run(root: Path, out: Path, inject: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("FARM_BROKER_URL", None)
    cmd = ["strace", "-f", "-qq", "-o", str(root / "trace.txt"), "-e", "trace=write"]
    if inject:
        cmd += ["-e", f"inject=write:{inject}"]
    return subprocess.run([*cmd, sys.executable, "-c", KILLED_RUN, str(manifest(root, 50)), str(out)], cwd=root,
                          env=env, capture_output=True, text=True, timeout=120)


@functools.cache
def strace_works() -> bool:
    """strace is there and may trace (a container without ptrace cannot)."""
    return bool(shutil.which("strace")) and subprocess.run(["strace", "-qq", "-o", os.devnull, "true"],
                                                           capture_output=True).returncode == 0


@pytest.mark.slow  # a farm process under strace, killed at each write
def test_a_kill_at_any_write_leaves_a_readable_job(models):
    """The coordinator is killed (SIGKILL, by strace, the write not done) at its 1st, 2nd, ... write:
    each time the job that is left loads, every trace is pending or done with its own digest, whole
    results only (a batch's frames are done together or not at all), and what is done only grows."""
    if not strace_works():
        pytest.skip("needs strace, allowed to trace")
    ok = traced_run(models, models / "full", None)
    assert ok.returncode == 0, ok.stderr
    writes = len((models / "trace.txt").read_text().splitlines())
    full = JobState.load("k", models / "full")
    assert full.counts()["done"] == full.counts()["total"]
    assert 8 <= writes < 200 and len(full.batches) >= 5
    done_before = -1
    between = set()  # how many frames were done where a kill fell between two progress records
    for n in range(1, writes + 1):
        out = models / f"kill{n}"
        got = traced_run(models, out, f"error=EIO:signal=SIGKILL:when={n}")
        assert got.returncode != 0, f"write {n} of {writes}: the run was not killed"
        if not FolderStore(out).has_job("k"):
            assert done_before <= 0, f"write {n}: the job document is gone"
            done_before = 0
            continue
        job = JobState.load("k", out)
        assert set(job.traces) == set(full.traces)
        statuses = {t["status"] for t in job.traces.values()}
        assert statuses <= {"pending", "done"}, (n, statuses)
        done = {k for k, t in job.traces.items() if t["status"] == "done"}
        assert all(job.traces[k]["digest"] == digest_of(k) for k in done)
        for b in job.batches.values():
            assert len(done & set(b["keys"])) in (0, len(b["keys"])), f"write {n}: batch {b['id']} half recorded"
        assert len(done) >= done_before, f"write {n}: {len(done)} done after {done_before}"
        done_before = len(done)
        if 0 < len(done) < len(full.traces):
            between.add(len(done))
        shutil.rmtree(out)
    assert done_before == len(full.traces)  # killed at its last write, the run had recorded everything
    assert len(between) >= len(full.batches) - 1, between  # a kill after each batch's record but the last


# --- a full disk


@pytest.fixture
def small_disk(tmp_path: Path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_full_disk_leaves_the_log_whole(models, small_disk, monkeypatch):
    _, job = simulated_run(models, 50, monkeypatch)
    shutil.copytree(job.store.root, small_disk / "store")
    store = FolderStore(small_disk / "store")
    job = JobState.load(job.id, store.location)
    log = store.job_log_path(job.id)
    log_before = log.read_bytes() if log.exists() else b""  # the run's end wrote the document: no log left
    filler = small_disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    key = sorted(job.traces)[0]
    t = job.traces[key]
    with pytest.raises(OSError, match="log.jsonl"):
        job.record(BatchResult(t["batch"], [FrameResult(key, t["time_ms"], "failed", error="disk full " * 500)]))
    assert (log.read_bytes() if log.exists() else b"") == log_before
    assert JobState.load(job.id, store.location).traces[key]["status"] == "done"
    filler.unlink()
    again = JobState.load(job.id, store.location)
    again.record(BatchResult(t["batch"], [FrameResult(key, t["time_ms"], "failed", error="room again")]))
    assert JobState.load(job.id, store.location).traces[key]["error"] == "room again"


def test_a_name_that_is_not_utf8_goes_through_the_log(tmp_path):
    """A model file named with bytes that are not UTF-8 (os.fsdecode's lone surrogates) in a key."""
    store = FolderStore(tmp_path)
    key = "models/\udcb0x.mdx|Stand|0ms|auto|32x32|msaa0|team0|transparent"
    record = {"seq": 1, "traces": {key: {"status": "failed", "error": "no such file: models/\udcb0x.mdx"}}}
    store.append_job_log("j", record)
    assert store.read_job_log("j") == [record]
