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

Start beat next to the workers (the task and the schedule are registered by farm.celery; this
module imports no Celery):

    FARM_NIGHTLY_MANIFEST=/assets/nightly.toml celery -A farm.celery beat
    celery -A farm.celery worker -Q farm,farm-nightly --concurrency 2   # or a worker of its own: -Q farm-nightly

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

from farm.compare.runs import compare_run
from farm.files import atomic_write_json
from farm.goldens import find_goldens
from farm.report import write_report
from farm.run.jobs import JobState, run_job
from farm.settings import default_out, env_int

__all__ = ["NIGHTLY_QUEUE", "TASK_NAME", "nightly_settings", "run_nightly"]

TASK_NAME = "farm.nightly"
NIGHTLY_QUEUE = "farm-nightly"


def nightly_settings(environ=None) -> dict | None:
    """The nightly settings from FARM_NIGHTLY_* (None when FARM_NIGHTLY_MANIFEST is not set)."""
    env = os.environ if environ is None else environ
    manifest = (env.get("FARM_NIGHTLY_MANIFEST") or "").strip()
    if not manifest:
        return None
    out = default_out(env)
    return {
        "manifest": manifest,
        "hour": env_int("FARM_NIGHTLY_HOUR", 2, env, maximum=23),
        "minute": env_int("FARM_NIGHTLY_MINUTE", 0, env, maximum=59),
        "reports": env.get("FARM_NIGHTLY_REPORTS") or str(Path(out) / "nightly"),
        "goldens": env.get("FARM_NIGHTLY_GOLDENS") or None,
        "out": out,
        "queue": env.get("FARM_NIGHTLY_QUEUE") or NIGHTLY_QUEUE,
        "time_limit": env_int("FARM_NIGHTLY_TIME_LIMIT", 12 * 3600, env, minimum=60, maximum=7 * 24 * 3600),
    }


def _abs(path: str | None) -> str | None:
    """Paths as beat sees them, made absolute: the worker that runs the task may start elsewhere."""
    return None if path is None else str(Path(path).absolute())


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
