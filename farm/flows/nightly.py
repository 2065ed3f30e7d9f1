"""Nightly runs: a Celery beat schedule that renders a manifest every night, compares it with its
goldens and writes a dated report and a status file.

Configuration: the FARM_NIGHTLY_* variables (manifest, hour, minute, reports, goldens, queue,
time limit, notify, state) in the environment of the beat process and of the worker that runs
the task; what each does and its default are in farm.environment.FARM_VARIABLES, which
`farm --help` prints (`nightly_settings` reads them).

Start beat next to the workers (the task and the schedule are registered by farm.celery; this
module imports no Celery). Beat keeps its schedule state (when each entry last ran) in a file; put
it in the state folder, so it survives restarts and does not land in whatever folder beat was
started from (`farm nightly beat-command` prints these lines, with the broker and folder filled in):

    export FARM_BROKER_URL=redis://localhost:6379/0
    FARM_NIGHTLY_MANIFEST=/assets/nightly.toml celery -A farm.celery beat \
        --schedule /srv/farm-out/nightly/state/celerybeat-schedule
    celery -A farm.celery worker -Q farm,farm-nightly --concurrency 2   # or a worker of its own: -Q farm-nightly

A night can also be run at once, in this process, without beat or Celery (the same function the
task runs): ``farm nightly run-now`` (the FARM_NIGHTLY_* settings, or its options).

The nightly task coordinates (it sends the batches to the render queue and waits for them), so it
has a queue of its own: a worker whose only pool process is busy waiting for the nightly task
could never render its batches.

Each night writes, under the reports folder::

    YYYY-MM-DD/          the report (index.html, junit.xml, summary.md, results.json)
    YYYY-MM-DD/status.json
    status.json          the latest night's status (same content)
    history.jsonl        one line per night: date, status, counts, run
    index.html           every night, newest first, with the pass/fail trend (`write_index`)

status.json: ``{"date", "status": "pass" | "fail" | "error", "counts", "problems", "job", "store",
"report", "manifest", "goldens", "started", "finished", "notify"}``. A run that cannot start (a
broken manifest, no goldens) still writes its status file, with status "error" and the reason.

Notification: after the status files, `notify` (FARM_NIGHTLY_NOTIFY) is told. An ``http://`` or
``https://`` URL gets a POST of the status JSON with ``"summary"`` (the night's summary.md, or a
line) added; anything else is a shell command line (run by ``/bin/sh -c``: pipes and redirections
work) that gets the summary on stdin and FARM_NIGHTLY_STATUS, FARM_NIGHTLY_DATE, FARM_NIGHTLY_REPORT (the absolute
path of the night's index.html) in its environment. A notification that fails is noted in
``status["notify"]`` and in the log; it never fails the night.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import traceback
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from farm.environment import default_out, env_given, env_str, nightly_settings
from farm.files import append_json_line, atomic_write, atomic_write_json
from farm.flows.pipeline import CompareOptions, compare_job
from farm.goldens import find_goldens
from farm.report.html import render_nightly_index
from farm.run.jobs import JobState, run_job
from farm.store import open_store

__all__ = ["SCHEDULE_NAME", "beat_command", "notify", "nightly_settings", "read_history", "run_nightly",
           "write_index"]

log = logging.getLogger("farm.nightly")
SCHEDULE_NAME = "celerybeat-schedule"  # beat's state file, in the state folder

def _abs(path: str | None) -> str | None:
    """Paths as beat sees them, made absolute: the worker that runs the task may start elsewhere."""
    return None if path is None else str(Path(path).absolute())


def _write_status(reports: Path, day_dir: Path, status: dict, history: bool = True) -> None:
    day_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(day_dir / "status.json", status)
    atomic_write_json(reports / "status.json", status)
    if history:
        append_json_line(reports / "history.jsonl",
                         {k: status.get(k) for k in ("date", "status", "counts", "job", "report", "finished")})
        write_index(reports)


def _swap(new: Path, day_dir: Path) -> None:
    """The new night's folder in place of the old one: the old report goes only once the new one exists."""
    old = day_dir.with_name(f".{day_dir.name}.old-{os.getpid()}")
    if day_dir.exists():
        day_dir.rename(old)
    new.rename(day_dir)
    shutil.rmtree(old, ignore_errors=True)


def read_history(reports: str | Path) -> list[dict]:
    """history.jsonl, one entry per date (a night run again: its last line), oldest first."""
    by_date: dict[str, dict] = {}
    try:
        text = (Path(reports) / "history.jsonl").read_text("utf-8")
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("date"):
            by_date[rec["date"]] = rec
    return [by_date[d] for d in sorted(by_date)]


def write_index(reports: str | Path) -> Path:
    """reports/index.html: every night (newest first) with its counts and report, and the trend."""
    reports = Path(reports)
    path = reports / "index.html"
    atomic_write(path, render_nightly_index(read_history(reports)).encode("utf-8"))
    return path


def beat_command(settings: dict, broker: str, environ: Mapping[str, str] | None = None) -> str:
    """The shell lines that start a nightly schedule: the broker both processes use, the `celery beat` line
    with its schedule file in the state folder (created), and a worker for the render and nightly queues."""
    env = os.environ if environ is None else environ
    state = Path(settings["state"]).absolute()
    state.mkdir(parents=True, exist_ok=True)
    queues = f"{env_str('FARM_QUEUE', env)},{settings['queue']}"
    return "\n".join((
        f"export FARM_BROKER_URL={shlex.quote(broker)}",
        f"FARM_NIGHTLY_MANIFEST={shlex.quote(str(Path(settings['manifest']).absolute()))} celery -A farm.celery"
        f" beat --schedule {shlex.quote(str(state / SCHEDULE_NAME))} --loglevel INFO &",
        f"celery -A farm.celery worker -Q {shlex.quote(queues)} --concurrency 2   # render and nightly queues;"
        " a worker with at least two processes, or one of its own for the nightly queue",
    ))


def _summary(day_dir: Path, status: dict) -> str:
    try:
        return (day_dir / "summary.md").read_text("utf-8")
    except OSError:
        problems = "; ".join(status.get("problems") or [])
        return f"modelfarm nightly {status['date']}: {status['status']}" + (f": {problems}" if problems else "")


def notify(target: str, status: dict, summary: str, report: Path | None, timeout: float = 30.0) -> dict:
    """Tell `target` (a URL: POST JSON; else a command: summary on stdin) about a night; what happened."""
    if target.startswith(("http://", "https://")):
        body = json.dumps({**status, "summary": summary}, sort_keys=True).encode("utf-8")
        req = urllib.request.Request(target, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "modelfarm"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return {"target": target, "ok": 200 <= r.status < 300, "detail": f"HTTP {r.status}"}
        except (urllib.error.URLError, OSError, ValueError) as e:
            return {"target": target, "ok": False, "detail": f"{type(e).__name__}: {e}"}
    env = {**os.environ, "FARM_NIGHTLY_STATUS": str(status.get("status")), "FARM_NIGHTLY_DATE": str(status["date"]),
           "FARM_NIGHTLY_REPORT": str(report.absolute()) if report else ""}
    try:  # a shell line, as a user writes it (pipes, redirections, quoting); its own session, so a timeout ends it all
        proc = subprocess.Popen(["/bin/sh", "-c", target], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    except OSError as e:
        return {"target": target, "ok": False, "detail": f"{type(e).__name__}: {e}"}
    try:
        _, err = proc.communicate(summary, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"target": target, "ok": False, "detail": f"still running after {timeout:g} s: stopped"}
    detail = f"exit status {proc.returncode}" + (f": {err.strip()[-300:]}" if proc.returncode else "")
    return {"target": target, "ok": proc.returncode == 0, "detail": detail}


def run_nightly(manifest: str | Path, *, reports: str | Path, goldens: str | Path | None = None,
                out: str | Path | None = None, broker: str | None = None, workers: int | None = None,
                now: _dt.datetime | None = None, allow_new: bool = False, notify_to: str | None = None,
                image_base: str | None = None, inputs: str | None = None) -> dict:
    """Render `manifest`, compare it with its goldens, write the dated report and status files,
    the index page, and tell `notify_to` (default FARM_NIGHTLY_NOTIFY). `image_base`: the http(s)
    URL where `reports` is published; the night's summary.md links its images under URL/DATE/.

    Returns the status dict. Never raises for a failing night: the status says "fail" or "error".
    """
    now = now or _dt.datetime.now(_dt.UTC)
    date = now.strftime("%Y-%m-%d")
    reports = Path(reports)
    day_dir = reports / date
    new = reports / f".{date}.new-{os.getpid()}"  # the night is written beside the last one, then swapped in
    shutil.rmtree(new, ignore_errors=True)
    status = {"date": date, "status": "error", "counts": None, "problems": [], "job": None,
              "store": str(out or default_out()), "report": None, "manifest": str(manifest),
              "goldens": None, "started": now.isoformat(timespec="seconds"), "finished": None, "notify": None}
    try:
        new.mkdir(parents=True)
        status["store"] = open_store(out or default_out()).location
        folder = find_goldens(manifest, goldens)
        if folder is None:
            raise FileNotFoundError(f"no goldens for {manifest}: set FARM_NIGHTLY_GOLDENS or put index.jsonl"
                                    f" next to the manifest")
        status["goldens"] = str(Path(folder).absolute())
        job_id = f"nightly-{now.strftime('%Y%m%d-%H%M%S')}"
        job: JobState = run_job(manifest, out=out, broker=broker, workers=workers, job_id=job_id, progress=False,
                                inputs=inputs)
        status["job"] = job.id
        base = image_base and f"{image_base.rstrip('/')}/{date}/"
        results = compare_job(job, CompareOptions(folder, allow_new=allow_new, report=new, image_base=base)).results
        _swap(new, day_dir)
        status.update(status=results["verdict"], counts=results["counts"], problems=results["problems"],
                      report=f"{date}/index.html")
    except Exception as e:  # noqa: BLE001 - the night's status file must say what went wrong
        status["problems"] = [f"{type(e).__name__}: {e}"]
        status["traceback"] = traceback.format_exc(limit=8)
    shutil.rmtree(new, ignore_errors=True)  # a night that failed: the last report stays where it was
    status["finished"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    _write_status(reports, day_dir, status)
    target = notify_to if notify_to is not None else env_given("FARM_NIGHTLY_NOTIFY")
    if target:  # after the status files, as the module says; its outcome is then added to them
        report = day_dir / "index.html" if status["report"] else None
        summary = _summary(day_dir if report else new, status)  # a failed night: its line, not the last summary
        status["notify"] = notify(target, status, summary, report)
        if not status["notify"]["ok"]:
            log.warning("nightly %s: the notification to %s failed: %s", date, target, status["notify"]["detail"])
        _write_status(reports, day_dir, status, history=False)
    return status
