"""The embedded local runner end to end: the real renderer in spawned processes, the CLI, status,
retry, determinism across worker counts, no GL in the parent, and a process that dies."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from farm.cli import main  # noqa: E402
from farm.plan.keys import parse_key  # noqa: E402
from farm.run.jobs import JobError, JobState, run_job  # noqa: E402
from farm.run.worker import SyntheticRenderer  # noqa: E402
from farm.store import FolderStore as Store  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BROKEN_MDX = b"MDLXVERS\x04\x00\x00\x00\x20\x03\x00\x00GEOS\xe8\x03\x00\x00" + bytes(8)

MANIFEST = """
name = "local"
size = "64x64"
timestamps = [0, "50%", "100%"]
[[models]]
paths = ["models/*.mdx"]
"""


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    """These tests are about the local runner, whatever the developer's environment says."""
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)
    monkeypatch.delenv("FARM_OUT", raising=False)


def real_renderer():
    """Skip (with the reason) only while the animation package the renderer needs is missing."""
    pytest.importorskip("renderer.anim", reason="renderer.anim (animation) has not landed yet")


@pytest.fixture
def job_dir(tmp_path: Path) -> Path:
    write_samples(tmp_path / "models")
    (tmp_path / "models" / "broken.mdx").write_bytes(BROKEN_MDX)
    (tmp_path / "job.toml").write_text(MANIFEST)
    return tmp_path


def job_of(out: Path) -> JobState:
    (job_id,) = Store(out).job_ids()
    return JobState.load(job_id, out)


def check_every_frame_once(job: JobState) -> None:
    """Each done trace has its image and sidecar; the store holds those images and nothing else."""
    store = job.store
    done = {k: t["digest"] for k, t in job.traces.items() if t["status"] == "done"}
    assert store.read_index(job.id) == dict(sorted(done.items()))
    assert len(set(done.values())) == len(done)  # different traces, different bytes (the PNG holds the trace)
    assert sorted(p.stem for p in store.images()) == sorted(done.values())
    assert list((store.root / "images").rglob("*.json")) == []  # sidecars travel in the batch results
    for key, digest in done.items():
        assert store.frame_sidecar(job.id, job.traces[key]["batch"], key, digest)["digest"] == digest
    assert not list(store.tmp.glob("*")) if store.tmp.exists() else True
    from renderer.png import read_png

    for key, digest in done.items():
        rgba, trace = read_png(store.image_path(digest))
        assert rgba.shape == (64, 64, 4)
        # the image was rendered at the trace's ms; the key names it, or the fraction ("50%") it came from
        assert trace["time_ms"] == job.traces[key]["time_ms"] and parse_key(key).time_ms in (trace["time_ms"], None)
        assert key.split("|")[1] in (trace["sequence"], "-")


def test_local_run_status_and_retry(job_dir, capsys):
    real_renderer()
    out = job_dir / "out"
    rc = main(["run", str(job_dir / "job.toml"), "--out", str(out), "--workers", "2", "--no-progress"])
    printed = capsys.readouterr()
    assert rc == 1  # the broken model's frame failed as planned (its sequences are unknown: one frame, at 0 ms)
    job = job_of(out)
    c = job.counts()
    assert c["failed"] == 1 and c["pending"] == 0 and c["done"] == c["total"] - 1 > 0
    failed = job.keys("failed")
    assert all(k.startswith("models/broken.mdx|-|") for k in failed)
    assert all("chunk GEOS at byte 20" in job.traces[k]["error"] for k in failed)
    assert all("models/broken.mdx does not load: " in job.traces[k]["error"] for k in failed)
    # a retry cannot fix a model that does not load: the hint says to fix the model (tests/test_plan_errors.py)
    assert "chunk GEOS at byte 20" in printed.out and "farm retry" not in printed.out
    check_every_frame_once(job)
    key = job.keys("done")[0]
    side = job.store.frame_sidecar(job.id, job.traces[key]["batch"], key, job.traces[key]["digest"])
    assert side["trace"]["gl"]["renderer"] and side["trace"]["model_hash"]
    # something was drawn: the crate covers part of its frame
    from renderer.png import read_png

    crate = next(k for k in job.keys("done") if k.startswith("models/crate.mdx|Stand|0ms"))
    assert read_png(job.store.image_path(job.traces[crate]["digest"]))[0][..., 3].any()

    assert main(["status", job.id, "--out", str(out)]) == 1
    assert "1 failed" in capsys.readouterr().out
    assert main(["status", str(job.store.job_path(job.id)), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["failed"] == 1

    # The model is fixed; the retry plans it again (its sequences are now known) and renders only it.
    shutil.copy(job_dir / "models" / "crate.mdx", job_dir / "models" / "broken.mdx")
    before = {k: t["digest"] for k, t in job.traces.items() if t["status"] == "done"}
    assert main(["retry", job.id, "--out", str(out), "--failed", "--no-progress"]) == 0
    job = job_of(out)
    assert job.counts()["failed"] == 0 and job.counts()["pending"] == 0
    assert not any(k.startswith("models/broken.mdx|-|") for k in job.traces)
    fixed = [k for k in job.traces if k.startswith("models/broken.mdx|")]
    assert {k.split("|")[1] for k in fixed} == {"Stand", "Spin", "Death"}
    assert all(job.traces[k]["digest"] == d for k, d in before.items())  # the rest untouched
    assert len(job.data["runs"]) == 2 and job.data["runs"][1]["frames"] == len(fixed)
    check_every_frame_once(job)
    assert main(["status", job.id, "--out", str(out)]) == 0


def test_same_bytes_for_any_worker_count_and_alone(job_dir):
    real_renderer()
    one = run_job(job_dir / "job.toml", out=job_dir / "one", workers=1, progress=False)
    two = run_job(job_dir / "job.toml", out=job_dir / "two", workers=2, progress=False)
    assert one.index() == two.index() and len(one.index()) == one.counts()["done"]
    (job_dir / "alone.toml").write_text('size = "64x64"\nsequences = ["Spin"]\ntimestamps = ["50%"]\n'
                                        '[[models]]\npath = "models/crate.mdx"\n')
    alone = run_job(job_dir / "alone.toml", out=job_dir / "alone", workers=1, progress=False)
    ((key, digest),) = alone.index().items()
    assert one.index()[key] == digest


def test_errors_are_reported_not_raised(job_dir, capsys):
    assert main(["status", "nope", "--out", str(job_dir / "out")]) == 2
    assert "no job 'nope'" in capsys.readouterr().err
    (job_dir / "bad.toml").write_text('[[models]]\npath = "models/*.mdz"\n')
    assert main(["run", str(job_dir / "bad.toml"), "--out", str(job_dir / "out")]) == 2
    assert "bad.toml:2: " in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["retry", "x", "--out", str(job_dir / "out")])  # neither --failed nor --pending


# --- renderers for the spawned pool processes (FARM_RENDERER=test_farm_local:...)


class EnvRenderer(SyntheticRenderer):
    def gl_info(self) -> dict:
        return {**super().gl_info(), "lp_num_threads": os.environ.get("LP_NUM_THREADS"), "pid": os.getpid()}


class CrashingRenderer(SyntheticRenderer):
    """Dies like a driver segfault (SIGKILL to itself) on any model whose file name starts with 'crash'."""

    def render(self, model, spec, model_digest=None):
        if Path(model.path).name.startswith("crash"):
            os.kill(os.getpid(), signal.SIGKILL)
        return super().render(model, spec, model_digest)


class LockDyingRenderer(SyntheticRenderer):
    """Dies (SIGKILL) on a model named 'crash*' while holding the write lock of the pool's progress
    queue, as a process killed by the stall watchdog or the OOM killer mid-report does."""

    def render(self, model, spec, model_digest=None):
        if Path(model.path).name.startswith("crash"):
            from farm.run import local

            local._queue._wlock.acquire()
            os.kill(os.getpid(), signal.SIGKILL)
        return super().render(model, spec, model_digest)


def test_a_process_killed_holding_the_progress_lock_does_not_hang_the_run(job_dir):
    """CI's hang (thumbnails on a full disk, 1 run in 15 under load): a pool process killed while it
    held the progress queue's write lock left the parent's exit waiting on that lock for ever (its
    queue feeder thread, joined at exit) and the next pool's processes blocked on it too. The run
    must end, fail the killer's batch only, and the process exit."""
    shutil.copy(job_dir / "models" / "crate.mdx", job_dir / "models" / "crash.mdx")
    (job_dir / "crash.toml").write_text('size = "32x32"\ntimestamps = [0]\nsequences = ["Stand"]\n'
                                        '[[models]]\npaths = ["models/crate.mdx", "models/crash.mdx"]\n')
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from farm.run.jobs import run_job
        job = run_job({str(job_dir / "crash.toml")!r}, out={str(job_dir / "out")!r}, workers=2, progress=False)
        print(json.dumps(job.counts()))
    """)
    env = {**os.environ, "FARM_RENDERER": "test_farm_local:LockDyingRenderer", "FARM_MAX_DELIVERIES": "2"}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {"total": 2, "done": 1, "failed": 1, "pending": 0}


def test_processes_are_recycled_after_max_tasks_and_the_run_ends(job_dir):
    """FARM_MAX_TASKS_PER_CHILD=2 with one process: every process renders at most 2 batches and the run
    ends (the executor's own max_tasks_per_child never replaced a retired process, CPython gh-115634:
    a run with more than 100 batches a process hung for ever)."""
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from farm.run.jobs import run_job
        from renderer.png import read_png
        job = run_job({str(job_dir / "job.toml")!r}, out={str(job_dir / "out")!r}, workers=1, progress=False)
        pids = [read_png(job.store.image_path(t["digest"]))[1]["gl"]["pid"] for t in job.traces.values()
                if t["status"] == "done"]
        print(json.dumps({{"counts": job.counts(), "batches": len(job.batches), "pids": pids}}))
    """)
    env = {**os.environ, "FARM_RENDERER": "test_farm_local:EnvRenderer", "FARM_MAX_TASKS_PER_CHILD": "2",
           "FARM_BATCH_FRAMES": "1"}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["counts"]["pending"] == 0 and report["batches"] >= 7, report
    per_process = {pid: report["pids"].count(pid) for pid in report["pids"]}
    assert max(per_process.values()) <= 2 and len(per_process) >= len(report["pids"]) / 2, per_process


@pytest.mark.parametrize("memory_kib, recycled", [("1", True), ("0", False)])
def test_processes_are_recycled_on_memory_not_by_count(job_dir, memory_kib, recycled):
    """The local pool recycles a process when its peak memory passes FARM_MAX_MEMORY_PER_CHILD (1 KiB:
    after every batch), never by count alone (FARM_MAX_TASKS_PER_CHILD unset: Celery's default of 100
    is not the pool's): with the memory bound off, one process renders every batch."""
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from farm.run.jobs import run_job
        from renderer.png import read_png
        job = run_job({str(job_dir / "job.toml")!r}, out={str(job_dir / "out")!r}, workers=1, progress=False)
        pids = [read_png(job.store.image_path(t["digest"]))[1]["gl"]["pid"] for t in job.traces.values()
                if t["status"] == "done"]
        print(json.dumps({{"counts": job.counts(), "batches": len(job.batches), "pids": pids}}))
    """)
    env = {**os.environ, "FARM_RENDERER": "test_farm_local:EnvRenderer", "FARM_BATCH_FRAMES": "1",
           "FARM_MAX_MEMORY_PER_CHILD": memory_kib}
    env.pop("FARM_MAX_TASKS_PER_CHILD", None)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["counts"]["pending"] == 0 and report["batches"] >= 7, report
    per_process = {pid: report["pids"].count(pid) for pid in report["pids"]}
    if recycled:  # a fresh pool after each batch; the executor may have handed a process 1-2 more already
        assert len(per_process) >= len(report["pids"]) / 4 and max(per_process.values()) <= 4, per_process
    else:
        assert len(per_process) == 1, per_process


def test_parent_never_loads_gl_and_children_split_the_cores(job_dir):
    real_renderer()
    code = textwrap.dedent(f"""
        import json, os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from farm.run.jobs import run_job
        from renderer.gl.threads import gl_driver_loaded
        gl = run_job({str(job_dir / "job.toml")!r}, out={str(job_dir / "gl")!r}, workers=2, progress=False)
        os.environ["FARM_RENDERER"] = "test_farm_local:EnvRenderer"
        env = run_job({str(job_dir / "job.toml")!r}, out={str(job_dir / "env")!r}, workers=2, progress=False)
        print(json.dumps({{"gl_loaded": gl_driver_loaded(), "lp": os.environ.get("LP_NUM_THREADS"),
                          "done": gl.counts()["done"], "env_job": env.id}}))
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("LP_NUM_THREADS", "FARM_RENDERER")}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["gl_loaded"] is False and report["lp"] is None and report["done"] > 0
    from renderer.gl.threads import available_cores

    job = JobState.load(report["env_job"], job_dir / "env")
    infos = [job.store.frame_sidecar(job.id, job.traces[k]["batch"], k, d)["trace"]["gl"]
             for k, d in job.index().items()]
    assert {i["lp_num_threads"] for i in infos} == {str(max(1, available_cores() // 2))}
    assert os.getpid() not in {i["pid"] for i in infos}


def test_a_process_that_dies_fails_only_its_own_batch(job_dir, monkeypatch):
    shutil.copy(job_dir / "models" / "crate.mdx", job_dir / "models" / "crash.mdx")
    monkeypatch.setenv("FARM_RENDERER", "test_farm_local:CrashingRenderer")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    (job_dir / "crash.toml").write_text('size = "64x64"\ntimestamps = [0, 100]\nsequences = ["Stand"]\n'
                                        '[[models]]\npaths = ["models/crate.mdx", "models/crash.mdx",'
                                        ' "models/effects.mdx"]\n')
    job = run_job(job_dir / "crash.toml", out=job_dir / "out", workers=2, progress=False)
    assert job.counts() == {"total": 6, "done": 4, "failed": 2, "pending": 0}
    for k in job.keys("failed"):
        assert k.startswith("models/crash.mdx|") and "died 3 times" in job.traces[k]["error"]


def test_status_and_retry_after_the_coordinator_died(job_dir, monkeypatch, capsys):
    """`farm run` stopped before recording anything; the workers went on and wrote their batch
    results. `status` folds those in; `retry --pending` renders only what no worker finished."""
    from farm.plan.batches import expand_manifest
    from farm.plan.manifest import load_manifest
    from farm.run.execute import render_batch

    monkeypatch.setenv("FARM_RENDERER", "synthetic")
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)
    m = load_manifest(job_dir / "job.toml")
    plan = expand_manifest(m)
    store = Store(job_dir / "out")
    job = JobState.create(store, m, plan, job_id="cut-short")
    job.save(force=True)
    finished = [b for b in plan.batches if not b.provisional][:2]
    for b in finished:  # what the workers managed before everything stopped
        render_batch(b, SyntheticRenderer, store, job.id)
    assert main(["status", "cut-short", "--out", str(store.root)]) == 1
    out = capsys.readouterr().out
    done = sum(len(b.keys) for b in finished)
    assert f"{done} done, 1 failed, {len(plan.traces) - done - 1} pending" in out and "--pending" in out
    saved = JobState.load("cut-short", store.root)  # status saved the merge, from the whole job: batches kept
    assert saved.counts()["done"] == done and saved.batches == job.batches
    with pytest.raises(JobError, match="loaded without its batches"):  # what status reads first: never saved
        JobState.load("cut-short", store.root, batches=False).save(force=True)
    assert main(["retry", "cut-short", "--out", str(store.root), "--pending", "--failed", "--no-progress",
                 "--workers", "1"]) == 1  # the broken model still does not load: its frame stays failed
    job = JobState.load("cut-short", store.root)
    assert job.counts()["pending"] == 0
    assert job.keys("failed") == ["models/broken.mdx|-|0ms|auto|64x64|msaa0|team0|transparent"]
    # neither the finished batches nor the model that does not load were sent again
    assert job.data["runs"][0]["frames"] == len(plan.traces) - done - 1


def test_broker_local_runs_here_whatever_farm_broker_url_says(job_dir, monkeypatch, capsys):
    """`--broker local` is resolved once: the runner does not resolve it again and pick up
    FARM_BROKER_URL (a broker that is not there: the run would stop on it, or go to Celery)."""
    monkeypatch.setenv("FARM_RENDERER", "synthetic")
    monkeypatch.setenv("FARM_BROKER_URL", "redis://127.0.0.1:1/0")  # nothing listens on port 1
    out = job_dir / "out"
    assert main(["run", str(job_dir / "job.toml"), "--out", str(out), "--broker", "local", "--workers", "1",
                 "--no-progress"]) == 1  # the broken model's frame failed as planned; the rest rendered
    assert "cannot reach the broker" not in capsys.readouterr().err
    job = job_of(out)
    assert job.data["runs"][-1]["mode"] == "local"
    assert job.counts()["pending"] == 0 and job.counts()["done"] == job.counts()["total"] - 1
    done = job.keys("done")[0]
    job.traces[done].update(status="pending", digest=None)  # as a `farm run` stopped before recording it
    job.save(force=True)
    assert main(["retry", job.id, "--out", str(out), "--pending", "--broker", "local", "--workers", "1",
                 "--no-progress"]) == 1
    assert "cannot reach the broker" not in capsys.readouterr().err
    job = JobState.load(job.id, out)
    assert job.data["runs"][-1]["mode"] == "local" and job.traces[done]["status"] == "done"


def test_a_retry_that_cannot_reach_its_broker_changes_nothing(job_dir, monkeypatch, capsys):
    """The broker is reached before the job is touched: a failed frame stays failed with its error,
    no run is recorded, its batch result stays."""
    from farm.run.execute import BatchResult, FrameResult

    monkeypatch.setenv("FARM_RENDERER", "synthetic")
    out = job_dir / "out"
    job = run_job(job_dir / "job.toml", out=out, workers=1, progress=False)
    key = job.keys("done")[0]
    t = job.traces[key]
    job.record(BatchResult(t["batch"], [FrameResult(key, t["time_ms"], "failed", error="the frame took too long")]))
    job.save(force=True)
    document = job.store.job_path(job.id).read_bytes()
    assert job.store.read_batch_result(job.id, t["batch"]) is not None
    assert main(["retry", job.id, "--out", str(out), "--failed", "--broker", "redis://127.0.0.1:1/0",
                 "--no-progress"]) == 2
    assert "cannot reach the broker redis://127.0.0.1:1/0" in capsys.readouterr().err
    again = JobState.load(job.id, out)
    assert again.traces[key]["status"] == "failed" and again.traces[key]["error"] == "the frame took too long"
    assert job.store.job_path(job.id).read_bytes() == document and len(again.data["runs"]) == 1
    assert job.store.read_batch_result(job.id, t["batch"]) is not None


def test_the_pool_waits_on_a_window_of_batches_not_on_all_of_them(job_dir):
    """A million-frame job is 21k batches: waiting on all of them at once cost a pass over every one
    per finished batch. The pool holds a few more than its processes and sends the next as one ends."""
    (job_dir / "many.toml").write_text(MANIFEST.replace('timestamps = [0, "50%", "100%"]',
                                                        f"timestamps = {list(range(0, 400, 20))}"))
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import farm.run.local as local
        waited, real = [], local.wait
        def wait(fs, **kw):
            waited.append(len(fs))
            return real(fs, **kw)
        local.wait = wait
        from farm.run.jobs import run_job
        job = run_job({str(job_dir / "many.toml")!r}, out={str(job_dir / "out")!r}, workers=1, progress=False)
        print(json.dumps({{"counts": job.counts(), "batches": len(job.batches), "most": max(waited)}}))
    """)
    env = {**os.environ, "FARM_RENDERER": "test_farm_local:EnvRenderer", "FARM_BATCH_FRAMES": "1"}
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["batches"] >= 60 and report["counts"]["done"] >= 60 and report["counts"]["pending"] == 0, report
    assert report["most"] <= 8, report  # 1 process: 4 a process + 4
