"""Nightly runs: the beat schedule from FARM_NIGHTLY_*, the task registered on the Celery app, and
the nightly function itself run directly (a real local render; no waiting for cron)."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from farm import goldens as G  # noqa: E402
from farm.celery.app import NIGHTLY_TASK as TASK_NAME  # noqa: E402
from farm.celery.app import beat_schedule  # noqa: E402
from farm.environment import nightly_settings  # noqa: E402
from farm.flows.nightly import run_nightly  # noqa: E402
from farm.run.jobs import JobState  # noqa: E402


def test_no_schedule_without_a_manifest():
    assert nightly_settings({}) is None
    assert beat_schedule({"FARM_NIGHTLY_HOUR": "3"}) == {}


def test_schedule_from_the_environment(tmp_path):
    env = {"FARM_NIGHTLY_MANIFEST": "assets/nightly.toml", "FARM_NIGHTLY_HOUR": "3", "FARM_NIGHTLY_MINUTE": "30",
           "FARM_OUT": str(tmp_path / "out")}
    entry = beat_schedule(env)["farm-nightly"]
    assert entry["task"] == TASK_NAME
    sched = entry["schedule"]
    assert sched.hour == {3} and sched.minute == {30}
    assert entry["kwargs"]["manifest"] == os.path.abspath("assets/nightly.toml")
    assert entry["kwargs"]["reports"] == str(tmp_path / "out" / "nightly")
    assert entry["options"]["queue"] == "farm-nightly"
    assert beat_schedule({"FARM_NIGHTLY_MANIFEST": "m.toml"})["farm-nightly"]["schedule"].hour == {2}
    with pytest.raises(ValueError, match="FARM_NIGHTLY_HOUR must be from 0 to 23, not 24"):
        beat_schedule({"FARM_NIGHTLY_MANIFEST": "m.toml", "FARM_NIGHTLY_HOUR": "24"})
    with pytest.raises(ValueError, match="FARM_NIGHTLY_MINUTE must be an integer"):
        beat_schedule({"FARM_NIGHTLY_MANIFEST": "m.toml", "FARM_NIGHTLY_MINUTE": "half past"})


def test_task_is_registered_on_the_app_with_its_own_queue():
    from farm.celery.tasks import app  # the tasks registered, as a worker has them

    assert TASK_NAME in app.tasks
    assert app.conf.task_routes[TASK_NAME] == {"queue": "farm-nightly"}
    assert app.tasks[TASK_NAME].acks_late is False


def test_nightly_writes_dated_reports_and_status_files(tmp_path, monkeypatch):
    pytest.importorskip("renderer.anim")
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)
    from renderer.samples import write_samples

    write_samples(tmp_path / "models")
    manifest = tmp_path / "nightly.toml"
    manifest.write_text('name = "nightly"\nsize = "32x32"\n[[models]]\npath = "models/filter_modes.mdx"\n')
    (tmp_path / "goldens").mkdir()
    (tmp_path / "goldens" / "index.jsonl").write_text('{"format": "modelfarm.goldens/1"}\n')
    reports, store = tmp_path / "reports", tmp_path / "store"

    night1 = dt.datetime(2026, 3, 1, 2, 0, tzinfo=dt.UTC)
    s1 = run_nightly(manifest, reports=reports, out=store, now=night1, workers=1)
    assert s1["status"] == "fail" and s1["counts"]["new"] == 1 and s1["date"] == "2026-03-01"
    assert (reports / "2026-03-01" / "index.html").is_file() and (reports / "2026-03-01" / "junit.xml").is_file()
    assert json.loads((reports / "2026-03-01" / "status.json").read_text()) == s1
    assert json.loads((reports / "status.json").read_text()) == s1
    assert s1["report"] == "2026-03-01/index.html" and s1["goldens"] == str(tmp_path / "goldens")

    job = JobState.load(s1["job"], store)
    G.approve(tmp_path / "goldens", job, list(job.traces), by="nightly test")
    s2 = run_nightly(manifest, reports=reports, out=store, now=night1 + dt.timedelta(days=1), workers=1)
    assert s2["status"] == "pass" and s2["counts"]["pass"] == 1
    assert json.loads((reports / "status.json").read_text())["date"] == "2026-03-02"
    history = [json.loads(x) for x in (reports / "history.jsonl").read_text().splitlines()]
    assert [(h["date"], h["status"]) for h in history] == [("2026-03-01", "fail"), ("2026-03-02", "pass")]

    # a night that cannot run still writes its status
    manifest.write_text("models = 3\n")
    s3 = run_nightly(manifest, reports=reports, out=store, now=night1 + dt.timedelta(days=2))
    assert s3["status"] == "error" and "ManifestError" in s3["problems"][0]
    assert json.loads((reports / "2026-03-03" / "status.json").read_text())["status"] == "error"
    (tmp_path / "sub").mkdir()
    s4 = run_nightly(tmp_path / "sub" / "x.toml", reports=reports, out=store, now=night1 + dt.timedelta(days=3))
    assert s4["status"] == "error" and "no goldens" in s4["problems"][0]


def test_the_task_runs_the_nightly_function_on_the_apps_broker(monkeypatch, tmp_path):
    from farm.celery.tasks import app  # the tasks registered, as a worker has them
    from farm.flows import nightly

    seen = {}

    def fake(manifest, **kw):
        seen.update(kw, manifest=manifest)
        return {"status": "pass"}

    monkeypatch.setattr(nightly, "run_nightly", fake)
    result = app.tasks[TASK_NAME].apply(kwargs={"manifest": "m.toml", "reports": str(tmp_path)}).get()
    assert result == {"status": "pass"}
    assert seen["manifest"] == "m.toml" and seen["reports"] == str(tmp_path)
    assert seen["broker"] == app.conf.broker_url


def test_a_night_that_fails_midway_keeps_the_last_report_and_notifies_after_the_status_files(tmp_path, monkeypatch):
    """Issue 35: a rerun deleted the day's report before the new one existed, opened the store outside
    the try, and notified before the status files were written."""
    from farm.flows import nightly

    reports, date = tmp_path / "reports", "2026-03-03"
    (reports / date).mkdir(parents=True)
    (reports / date / "index.html").write_text("the last good report")
    (tmp_path / "goldens").mkdir()
    (tmp_path / "goldens" / "index.jsonl").write_text("")
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[models]]\npath = "x.mdx"\n')

    def half_a_night(job, options, **kw):
        (Path(options.report) / "index.html").write_text("half written")
        raise OSError("disk full while writing the report")

    monkeypatch.setattr(nightly, "run_job", lambda *a, **kw: SimpleNamespace(id="nightly-1"))
    monkeypatch.setattr(nightly, "compare_job", half_a_night)
    seen = tmp_path / "seen.json"
    now = dt.datetime(2026, 3, 3, 2, 0, tzinfo=dt.UTC)
    s = run_nightly(manifest, reports=reports, goldens=tmp_path / "goldens", out=tmp_path / "store", now=now,
                    notify_to=f"cat {reports / 'status.json'} > {seen}")
    assert s["status"] == "error" and "disk full" in s["problems"][0] and s["notify"]["ok"]
    assert (reports / date / "index.html").read_text() == "the last good report"
    assert [p.name for p in reports.iterdir() if p.name.startswith(".")] == []  # no half night left
    told = json.loads(seen.read_text())  # what the status file said when the command ran: this night
    assert told["status"] == "error" and told["finished"] == s["finished"] and told["notify"] is None
    assert json.loads((reports / "status.json").read_text())["notify"]["ok"] is True

    monkeypatch.setattr(nightly, "run_job", lambda *a, **kw: (_ for _ in ()).throw(RuntimeError("boom")))
    monkeypatch.setattr(nightly, "open_store", lambda *a: (_ for _ in ()).throw(ValueError("ftp://x: no store")))
    s = run_nightly(manifest, reports=reports, goldens=tmp_path / "goldens", out="ftp://x", now=now)
    assert s["status"] == "error" and "no store" in s["problems"][0]  # a bad store is the night's status, not a raise
