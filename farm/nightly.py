"""Nightly runs: a Celery beat schedule that renders a manifest every night, compares it with its
goldens and writes a dated report and a status file.

Configuration (environment of the beat process and of the worker that runs the task):

=========================  ====================================================  =====================
variable                   meaning                                               default
=========================  ====================================================  =====================
FARM_NIGHTLY_MANIFEST      the manifest to run; no schedule without it           -
FARM_NIGHTLY_HOUR          hour of the day (0-23, in the app's timezone: UTC)    2
FARM_NIGHTLY_MINUTE        minute (0-59)                                         0
FARM_NIGHTLY_REPORTS       where the dated reports and status files go           $FARM_OUT/nightly
FARM_NIGHTLY_GOLDENS       the goldens folder                                    found next to the manifest
FARM_NIGHTLY_QUEUE         the queue the nightly task goes to                    farm-nightly
FARM_NIGHTLY_TIME_LIMIT    seconds the whole nightly run may take                43200 (12 h)
=========================  ====================================================  =====================

Start beat next to the workers (from the repository root; `tasks.py` re-exports the app):

    FARM_NIGHTLY_MANIFEST=/assets/nightly.toml celery -A tasks beat
    celery -A tasks worker -Q farm,farm-nightly --concurrency 2     # or a worker of its own: -Q farm-nightly

The nightly task coordinates (it sends the batches to the render queue and waits for them), so it
has a queue of its own: a worker whose only pool process is busy waiting for the nightly task
could never render its batches.

Each night writes, under the reports folder::

    YYYY-MM-DD/          the report (index.html, junit.xml, summary.md, results.json)
    YYYY-MM-DD/status.json
    status.json          the latest night's status (same content)
    history.jsonl        one line per night: date, status, counts, run

status.json: ``{"date", "status": "pass" | "fail" | "error", "counts", "problems", "job", "store",
"report", "manifest", "goldens", "started", "finished"}``. A run that cannot start (a broken
manifest, no goldens) still writes its status file, with status "error" and the reason.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import traceback
from pathlib import Path

from farm.store import atomic_write_json

__all__ = ["TASK_NAME", "beat_schedule", "nightly_settings", "register", "run_nightly"]

TASK_NAME = "farm.nightly"


def _int(env, name: str, default: int, lo: int, hi: int) -> int:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        v = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer from {lo} to {hi}, not {raw!r}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be from {lo} to {hi}, not {v}")
    return v


def nightly_settings(environ=None) -> dict | None:
    """The nightly settings from FARM_NIGHTLY_* (None when FARM_NIGHTLY_MANIFEST is not set)."""
    env = os.environ if environ is None else environ
    manifest = (env.get("FARM_NIGHTLY_MANIFEST") or "").strip()
    if not manifest:
        return None
    out = env.get("FARM_OUT") or "farm-out"
    return {
        "manifest": manifest,
        "hour": _int(env, "FARM_NIGHTLY_HOUR", 2, 0, 23),
        "minute": _int(env, "FARM_NIGHTLY_MINUTE", 0, 0, 59),
        "reports": env.get("FARM_NIGHTLY_REPORTS") or str(Path(out) / "nightly"),
        "goldens": env.get("FARM_NIGHTLY_GOLDENS") or None,
        "out": out,
        "queue": env.get("FARM_NIGHTLY_QUEUE") or "farm-nightly",
        "time_limit": _int(env, "FARM_NIGHTLY_TIME_LIMIT", 12 * 3600, 60, 7 * 24 * 3600),
    }


def _abs(path: str | None) -> str | None:
    """Paths as beat sees them, made absolute: the worker that runs the task may start elsewhere."""
    return None if path is None else str(Path(path).absolute())


def beat_schedule(environ=None) -> dict:
    """Celery's beat_schedule: one entry running the nightly task at HOUR:MINUTE, or {}."""
    s = nightly_settings(environ)
    if s is None:
        return {}
    from celery.schedules import crontab

    return {
        "farm-nightly": {
            "task": TASK_NAME,
            "schedule": crontab(hour=s["hour"], minute=s["minute"]),
            "kwargs": {"manifest": _abs(s["manifest"]), "reports": _abs(s["reports"]), "goldens": _abs(s["goldens"]),
                       "out": _abs(s["out"])},
            "options": {"queue": s["queue"], "expires": 20 * 3600},
        }
    }


def _write_status(reports: Path, day_dir: Path, status: dict) -> None:
    atomic_write_json(day_dir / "status.json", status)
    atomic_write_json(reports / "status.json", status)
    line = {k: status.get(k) for k in ("date", "status", "counts", "job", "report", "finished")}
    with open(reports / "history.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")


def run_nightly(manifest: str | Path, *, reports: str | Path, goldens: str | Path | None = None,
                out: str | Path | None = None, broker: str | None = None, workers: int | None = None,
                now: _dt.datetime | None = None, allow_new: bool = False) -> dict:
    """Render `manifest`, compare it with its goldens, write the dated report and status files.

    Returns the status dict. Never raises for a failing night: the status says "fail" or "error".
    """
    from farm.compare_runs import compare_run
    from farm.goldens import find_goldens
    from farm.jobs import JobState, default_out, run_job
    from farm.report import write_report

    now = now or _dt.datetime.now(_dt.UTC)
    date = now.strftime("%Y-%m-%d")
    reports = Path(reports)
    day_dir = reports / date
    if day_dir.exists():  # the same night again (a rerun): the newer report replaces it
        shutil.rmtree(day_dir)
    day_dir.mkdir(parents=True)
    status = {"date": date, "status": "error", "counts": None, "problems": [], "job": None,
              "store": str(Path(out or default_out()).absolute()), "report": None, "manifest": str(manifest),
              "goldens": None, "started": now.isoformat(timespec="seconds"), "finished": None}
    try:
        folder = find_goldens(manifest, goldens)
        if folder is None:
            raise FileNotFoundError(f"no goldens for {manifest}: set FARM_NIGHTLY_GOLDENS or put index.jsonl"
                                    f" next to the manifest")
        status["goldens"] = str(Path(folder).absolute())
        job_id = f"nightly-{now.strftime('%Y%m%d-%H%M%S')}"
        job: JobState = run_job(manifest, out=out, broker=broker, workers=workers, job_id=job_id, progress=False)
        status["job"] = job.id
        results = compare_run(job, folder, allow_new=allow_new)
        write_report(results, day_dir)
        status.update(status=results["verdict"], counts=results["counts"], problems=results["problems"],
                      report=f"{date}/index.html")
    except Exception as e:  # noqa: BLE001 - the night's status file must say what went wrong
        status["problems"] = [f"{type(e).__name__}: {e}"]
        status["traceback"] = traceback.format_exc(limit=8)
    status["finished"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    _write_status(reports, day_dir, status)
    return status


def register(app):
    """Register the nightly task on a Celery app and install the beat schedule from the environment."""
    settings = nightly_settings() or {}
    limit = settings.get("time_limit", 12 * 3600)

    @app.task(name=TASK_NAME, bind=True, acks_late=False, time_limit=limit + 300, soft_time_limit=limit)
    def nightly_task(self, manifest: str, reports: str, goldens: str | None = None, out: str | None = None) -> dict:
        """Run a manifest on the farm's workers (the app's broker) and write the night's report."""
        broker = self.app.conf.broker_url
        return run_nightly(manifest, reports=reports, goldens=goldens, out=out, broker=broker)

    app.conf.beat_schedule = {**(app.conf.beat_schedule or {}), **beat_schedule()}
    queue = settings.get("queue") or os.environ.get("FARM_NIGHTLY_QUEUE") or "farm-nightly"
    routes = dict(app.conf.task_routes or {})
    routes[TASK_NAME] = {"queue": queue}
    app.conf.task_routes = routes
    return nightly_task
