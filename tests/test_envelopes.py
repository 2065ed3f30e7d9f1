"""Envelopes (farm.plan.envelopes): many small batches to one delivery, each batch's result its own.

Thumbnails go out in ceil(N / FARM_BATCH_FRAMES) deliveries with the same bytes as one model a
delivery; a worker killed mid-envelope loses no model it finished; an envelope a Celery task lost
fails only the models whose results never came; a redelivered envelope renders only the rest."""

from __future__ import annotations

import math
import os
import shutil
import signal
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from farm.plan.batches import Batch  # noqa: E402
from farm.plan.envelopes import Envelope, envelopes  # noqa: E402
from farm.run.execute import BatchResult, FrameResult, render_envelope  # noqa: E402
from farm.run.worker import SyntheticRenderer  # noqa: E402
from farm.store import FolderStore  # noqa: E402
from farm.thumbs import ThumbnailOptions, make_thumbnails  # noqa: E402
from renderer.samples import write_samples  # noqa: E402


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)


def _batch(i: int, frames: int = 1) -> Batch:
    return Batch(f"/m/{i}.mdx", f"m{i}.mdx", None, None, None, list(range(frames)),
                 [f"m{i}|{t}" for t in range(frames)], kind="thumbnail")


@pytest.mark.parametrize("n, budget", [(1, 48), (48, 48), (49, 48), (100, 48), (2000, 48), (7, 3)])
def test_n_one_frame_batches_make_ceil_n_over_budget_envelopes(n, budget):
    batches = [_batch(i) for i in range(n)]
    out = envelopes(batches, budget)
    assert len(out) == math.ceil(n / budget)
    assert [b.id for e in out for b in e.batches] == [b.id for b in batches]  # every batch once, in order
    assert all(e.frames <= budget for e in out)
    assert max(e.frames for e in out) - min(e.frames for e in out) <= 2  # as even as possible


def test_a_pool_gets_an_envelope_per_process_and_a_large_batch_goes_alone():
    assert len(envelopes([_batch(i) for i in range(10)], 48, least=4)) == 4
    out = envelopes([_batch(0), _batch(1, 60), _batch(2)], 48)
    assert [[b.model_rel for b in e.batches] for e in out] == [["m0.mdx"], ["m1.mdx"], ["m2.mdx"]]


def test_an_envelope_travels_as_json_and_keeps_its_id():
    e = envelopes([_batch(i) for i in range(3)], 48)[0]
    back = Envelope.from_dict(e.to_dict())
    assert back.id == e.id and [b.to_dict() for b in back.batches] == [b.to_dict() for b in e.batches]


def test_a_time_limit_stops_the_envelope_and_fails_the_rest_unrendered(tmp_path):
    store = FolderStore(tmp_path / "store")
    batches = [_batch(i) for i in range(4)]
    rendered = []

    def one(b: Batch) -> BatchResult:
        rendered.append(b.model_rel)
        r = BatchResult(b.id, [FrameResult(b.keys[0], 0, "done" if len(rendered) < 2 else "failed")])
        r.aborted = "batch time limit reached (SoftTimeLimitExceeded)" if len(rendered) == 2 else None
        return r

    results = render_envelope(batches, one, store, "job")
    assert rendered == ["m0.mdx", "m1.mdx"]
    assert [r.frames[0].status for r in results] == ["done", "failed", "failed", "failed"]
    assert "time limit" in results[3].frames[0].error and "not started" in results[3].frames[0].error


# --- thumbnails: the local runner


def _tree(root: Path, n: int) -> Path:
    write_samples(root / "samples")
    small = min((root / "samples").glob("*.mdx"), key=lambda p: p.stat().st_size)
    tree = root / "tree"
    tree.mkdir()
    for i in range(n):
        shutil.copy(small, tree / f"m{i:03d}.mdx")
    shutil.rmtree(root / "samples")
    return tree


def _spy(real, sent: list):
    """_LocalRun.envelopes, noting each envelope it makes in `sent`."""
    def envelopes_spied(self, ids, n):
        made = real(self, ids, n)
        sent.extend(made)
        return made

    return envelopes_spied


def _files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted((out / "thumbs").rglob("*")) if p.is_file()}


def test_thumbnails_go_out_in_ceil_n_over_budget_deliveries_with_the_same_bytes(tmp_path, monkeypatch):
    """13 models, a budget of 3 frames, one process: 5 local submissions (ceil(13 / 3), above the
    PER_PROCESS floor of 4); every thumbnail (and its digest-keyed copy) is the bytes of a run that
    sends one model a submission."""
    from farm.run import local
    from farm.thumbs import run as thumbs_run

    tree = _tree(tmp_path, 13)
    monkeypatch.setenv("FARM_RENDERER", "synthetic")
    monkeypatch.setenv("FARM_BATCH_FRAMES", "3")
    sent = []
    real = local._LocalRun.envelopes
    monkeypatch.setattr(local._LocalRun, "envelopes", _spy(real, sent))
    opts = ThumbnailOptions(size=16, sheet=0)
    grouped = make_thumbnails([tree], tmp_path / "grouped", opts, workers=1, progress=False)
    assert grouped.models == 13 and not grouped.failed
    assert len(sent) == 5 and sorted(len(e.batches) for e in sent) == [2, 2, 3, 3, 3]

    real_run = thumbs_run.run_batches
    monkeypatch.setattr(thumbs_run, "run_batches", lambda *a, **kw: real_run(*a, **{**kw, "group": False}))
    sent.clear()
    single = make_thumbnails([tree], tmp_path / "single", opts, workers=1, progress=False)
    assert not single.failed and len(sent) == 13
    assert _files(tmp_path / "grouped") == _files(tmp_path / "single") and len(_files(tmp_path / "single")) == 13
    keyed = [sorted((tmp_path / run / "by-sha256").iterdir()) for run in ("grouped", "single")]
    assert [p.read_bytes() for p in keyed[0]] == [p.read_bytes() for p in keyed[1]]  # copies of one model: one key


class CountingCrashRenderer(SyntheticRenderer):
    """Notes each model it renders (FARM_TEST_RENDERS); dies (SIGKILL) on a model named '*crash*'."""

    def render(self, model, spec, model_digest=None):
        with open(os.environ["FARM_TEST_RENDERS"], "a") as f:
            f.write(Path(model.path).name + "\n")
        if "crash" in Path(model.path).name:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().render(model, spec, model_digest)


def test_a_worker_killed_mid_envelope_loses_no_finished_model(tmp_path, monkeypatch):
    """10 models in 4 envelopes (one process: PER_PROCESS); the second envelope is m002, the killer,
    m003: m002, finished before the kill in the same envelope, is kept (rendered once), the killer
    fails after the delivery limit, m003 and every other model render once."""
    tree = _tree(tmp_path, 9)
    shutil.copy(tree / "m000.mdx", tree / "m002z-crash.mdx")  # same size: ordered by name, after m002
    renders = tmp_path / "renders.txt"
    monkeypatch.setenv("FARM_RENDERER", "test_envelopes:CountingCrashRenderer")
    monkeypatch.setenv("FARM_TEST_RENDERS", str(renders))
    monkeypatch.setenv("FARM_BATCH_FRAMES", "10")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    from farm.run import local

    sent = []
    real = local._LocalRun.envelopes
    monkeypatch.setattr(local._LocalRun, "envelopes", _spy(real, sent))
    summary = make_thumbnails([tree], tmp_path / "out", ThumbnailOptions(size=16, sheet=0), workers=1,
                              progress=False)
    assert [Path(b.model_rel).name for b in sent[1].batches] == ["m002.mdx", "m002z-crash.mdx", "m003.mdx"]
    assert list(summary.failed) == ["tree/m002z-crash.mdx"] and summary.done == 9
    counts = {}
    for name in renders.read_text().split():
        counts[name] = counts.get(name, 0) + 1
    assert counts.pop("m002z-crash.mdx") == 3  # FARM_MAX_DELIVERIES
    assert counts == {f"m{i:03d}.mdx": 1 for i in range(9)}  # none of the others rendered twice


# --- the Celery side, in-process


def test_a_lost_envelope_fails_only_its_unfinished_models(tmp_path, monkeypatch):
    """The envelope task failed (the hard time limit): the models the worker finished (kept in the
    store) stay done, images and all, each passed on once; only the others fail."""
    from farm.run import celery as runner

    # no result backend of this thread's own (Celery keeps one per thread, made with the config of the
    # moment: a later test's worker fixture would then read another backend)
    monkeypatch.setattr(runner, "app", SimpleNamespace(backend=SimpleNamespace(forget=lambda task_id: None)))
    store = FolderStore(tmp_path / "store")
    env = envelopes([_batch(i) for i in range(4)], 48)[0]
    got: list[BatchResult] = []
    once = runner._Once(got.append)
    for b in env.batches[:2]:  # kept by the worker before it was lost
        store.write_batch_result("job", {"batch": b.id, "frames": [
            {"key": b.keys[0], "time_ms": 0, "status": "done", "digest": "d", "error": None, "info": {"image": "x"}}]})
    pending = {"t1": env}
    runner._from_store("job", store, pending, {}, once)  # still running (its last model not stored): left to the task
    assert got == [] and pending == {"t1": env}
    runner._take("job", store, "t1", {"status": "FAILURE", "result": TimeoutError("hard time limit")}, pending,
                 once, None, lambda fn, *a: None)
    assert pending == {} and [r.batch for r in got] == [b.id for b in env.batches]
    assert [r.frames[0].status for r in got] == ["done", "done", "failed", "failed"]
    assert got[0].frames[0].info == {"image": "x"} and "hard time limit" in got[3].frames[0].error


def _in_a_thread(fn):
    """`fn()` in a thread of its own: the result backend Celery makes for it (one a thread, with the
    config of the moment) goes with the thread, not left to later tests in this one."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(120)
    return out[0]


def test_an_envelope_task_returns_results_together_and_a_redelivery_renders_only_the_rest(tmp_path, monkeypatch):
    """farm.render_envelope, eager: every model's result in one answer, each also kept in the store;
    the same envelope delivered again renders nothing (each model is done in the store)."""
    from farm.celery.tasks import render_envelope_task
    from farm.plan.batches import model_digest
    from farm.run import worker as farm_worker
    from farm.thumbs.find import find_models
    from farm.thumbs.run import _batch as thumb_batch

    tree = _tree(tmp_path, 3)
    opts = ThumbnailOptions(size=16, sheet=0)
    batches = [thumb_batch(f, model_digest(str(f.path)), opts, []) for f in find_models([tree])]
    renders = []

    class Counting(SyntheticRenderer):
        def render(self, model, spec, model_digest=None):
            renders.append(Path(model.path).name)
            return super().render(model, spec, model_digest)

    monkeypatch.setattr(farm_worker, "get_renderer", Counting)
    env = Envelope(batches)
    kwargs = {"job_id": "j", "envelope": env.to_dict(), "out": str(tmp_path / "out")}
    first = _in_a_thread(lambda: render_envelope_task.apply(kwargs=kwargs))
    assert first.successful(), first.traceback
    assert first.result["envelope"] == env.id and len(first.result["results"]) == 3 and len(renders) == 3
    again = _in_a_thread(lambda: render_envelope_task.apply(kwargs=kwargs))
    assert again.successful(), again.traceback
    assert len(renders) == 3  # the redelivery found every model done
    strip = [[{k: v for k, v in f.items() if k != "render_s"} for f in r["frames"]] for r in again.result["results"]]
    assert strip == [[{k: v for k, v in f.items() if k != "render_s"} for f in r["frames"]]
                     for r in first.result["results"]]


def test_an_envelope_whose_result_the_backend_lost_is_read_from_the_store(tmp_path):
    """Redis restarted without the envelope's result: once its last model is in the store, every model
    is read from there, each passed on once, and the task is no longer waited for."""
    from farm.run import celery as runner

    store = FolderStore(tmp_path / "store")
    env = envelopes([_batch(i) for i in range(3)], 48)[0]
    got: list[BatchResult] = []
    for b in env.batches:
        store.write_batch_result("job", {"batch": b.id, "frames": [
            {"key": b.keys[0], "time_ms": 0, "status": "done", "digest": "d", "error": None}]})
    pending = {"t1": env}
    runner._from_store("job", store, pending, {}, runner._Once(got.append))
    assert pending == {} and [r.batch for r in got] == [b.id for b in env.batches]
