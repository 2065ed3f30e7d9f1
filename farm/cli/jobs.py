"""Commands on jobs: run, status, retry, demo, nightly; and the comparison step that follows `farm run`."""

from __future__ import annotations

import datetime as _dt
import json
import sys
from pathlib import Path
from typing import TextIO

from farm.cli.bootstrap import bootstrap_command, bootstrap_hint, say_update
from farm.cli.common import (
    RUN_HELP,
    UsageError,
    add_runner_options,
    add_summary_args,
    image_base_arg,
    job_ref,
    print_results,
    reports_note,
    results_json,
    workers_arg,
)
from farm.environment import broker_url, default_reports
from farm.files import file_digest
from farm.flows.demo import run_demo
from farm.flows.nightly import beat_command, nightly_settings, run_nightly, write_index
from farm.flows.pipeline import UPDATE_MODES, CompareOptions, all_new, compare_job
from farm.goldens import GoldenError
from farm.plan.causes import CAUSE_HINTS, UNLOADABLE
from farm.report.model import shell_path
from farm.repository import store_ignore_hint
from farm.run.jobs import JobState, retry_job, run_job, status_text

__all__ = ["EXAMPLES", "add_parsers", "compare_after_run", "compare_step"]

EXAMPLES = {
    "run": ["farm run nightly.toml                       # render, compare with the goldens next to it",
            "farm run nightly.toml --update-goldens      # a first run: approve the new traces as goldens",
            "farm run nightly.toml -o report/ --json     # write the report, print JSON",
            "farm run nightly.toml --broker redis://localhost:6379/0 --allow-new"],
    "status": ["farm status latest", "farm status nightly-20260101-020000 --out /srv/farm-out --json"],
    "retry": ["farm retry latest --failed", "farm retry JOB --failed --pending --workers 4"],
    "demo": ["farm demo --out demo-out"],
    "nightly": ["farm nightly run-now --manifest nightly.toml --notify 'mail -s nightly team@example.com'",
                "farm nightly run-now --notify https://chat.example/hooks/farm",
                "farm nightly beat-command --manifest /assets/nightly.toml   # prints the celery beat line",
                "farm nightly index --reports farm-out/nightly"],
}


def compare_step(job, options: CompareOptions, out: TextIO | None = None) -> tuple[int | None, dict | None, object]:
    """The comparison step of `farm run` (farm.flows.pipeline.compare_job, saying what it did): (exit status
    or None when the run has no goldens and none were asked for, the results, the report's index.html).
    Messages go to `out` (stdout unless given: --json keeps stdout for its one object), errors to
    stderr.

    `options.update` (--update-goldens=new|failed|all) approves those traces after the comparison (a
    new goldens folder, <manifest folder>/goldens, is created when there is none) and compares again."""
    out = out or sys.stdout
    try:
        done = compare_job(job, options, on_update=lambda up, results: say_update(job, up, results, out))
    except (UsageError, GoldenError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2, None, None
    if done.status is None:  # what each frame shows (placeholders, blank) names the bootstrap's flags
        print(f"no goldens next to {job.data.get('manifest')}: frames rendered, not compared. To make these"
              f" frames the goldens after looking at them: {bootstrap_command(job, None, done.first)}"
              f"{bootstrap_hint(done.first)}", file=out)
        return None, None, None
    if not options.update and done.all_new:
        print(f"first run against {done.folder}: every trace that rendered is new. After a look at the frames,"
              f" approve them"
              f" with: {bootstrap_command(job, done.folder, done.results)}{bootstrap_hint(done.results)}", file=out)
    reports_note(done.reports, options.image_base)
    return done.status, done.results, done.html


def compare_after_run(job, options: CompareOptions) -> int | None:
    """`compare_step`, printing the summary (farm run)."""
    code, results, html = compare_step(job, options)
    if results is not None:  # a first run printed its bootstrap command: the one command to approve with
        print_results(results, report=html, approve=bool(options.update) or not all_new(results))
    return code


def cmd_demo(args) -> int:
    """The project's own regression suite: sample models -> local runner -> goldens/ -> report."""
    return run_demo(args.out, args.goldens, args.workers)


def _finish_job(job, verb: str) -> int:
    c = job.counts()
    print(status_text(job))
    if c["failed"] or c["pending"]:
        print(f"farm {verb}: {c['failed']} frame(s) failed, {c['pending']} not rendered", file=sys.stderr)
        return 1
    return 0


def _job_json(job) -> dict:
    return {"job": job.id, "store": job.store.location, **job.counts(),
            "failed_traces": {k: job.traces[k]["error"] for k in job.keys("failed")}}


def cmd_run(args) -> int:
    try:
        job = run_job(args.manifest, out=args.out, broker=args.broker, workers=args.workers, job_id=args.job_id,
                      progress=False if args.no_progress else None, inputs=args.inputs)
    except KeyboardInterrupt:
        print("farm run: interrupted; `farm status JOB` shows what finished (Celery workers carry on)",
              file=sys.stderr)
        return 130
    if job.store.kind == "folder":  # a store inside a git work tree: say once how to keep it out of commits
        hint = store_ignore_hint(job.store.location)
        if hint:
            print(hint, file=sys.stderr)
    if args.json:  # everything on stdout is one JSON object: the job, then its comparison
        c = job.counts()
        rendered = 1 if c["failed"] or c["pending"] else 0
        out = {"run": _job_json(job), "comparison": None}
        compared = None
        if not args.no_compare:
            compared, results, html = compare_step(job, compare_options(args), out=sys.stderr)
            if results is not None:
                out["comparison"] = results_json(results, html)
        print(json.dumps(out, indent=2, sort_keys=True))
        return max(rendered, compared or 0)
    rendered = _finish_job(job, "run")
    if args.no_compare:
        return rendered
    compared = compare_after_run(job, compare_options(args))
    return max(rendered, compared or 0)


def compare_options(args) -> CompareOptions:
    """What `farm run` asks of its comparison step (compare_step), with --json or without."""
    return CompareOptions(args.goldens, allow_new=args.allow_new, update=args.update_goldens,
                          allow_blank=args.allow_blank, allow_missing=args.allow_missing, report=args.report,
                          image_base=args.image_base, report_url=args.report_url)


def cmd_status(args) -> int:
    ref = job_ref(args.job, args.out)
    job = JobState.load(ref, args.out, batches=False)  # status shows no batch
    if job.merge_worker_results(save=False):  # results the job does not hold yet: saved, from the whole job
        job = JobState.load(ref, args.out)
        job.merge_worker_results(save=False)
        try:  # best effort: status only reads, so a read-only or full store still answers
            job.save()
        except OSError as e:
            print(f"farm status: the results merged from the workers are shown, not saved in the store"
                  f" ({e.strerror or e})", file=sys.stderr)
    if args.json:
        print(json.dumps(_job_json(job), indent=2, sort_keys=True))
    else:
        print(status_text(job, limit=args.limit))
    c = job.counts()
    return 0 if not (c["failed"] or c["pending"]) else 1


def manifest_change(job) -> str | None:
    """A sentence when the job's manifest changed (or went) since the job was planned, else None.
    Jobs recorded before the manifest's sha256 was kept are judged by the file's time."""
    manifest = job.data.get("manifest")
    if not manifest:
        return None
    path = Path(manifest)
    if not path.is_file():
        return f"the manifest {manifest} of job {job.id} is gone; retry renders the traces as they were planned"
    then = job.data.get("manifest_sha256")
    if then:
        changed = file_digest(path) != then
    else:
        created = job.data.get("created")
        try:
            changed = created is not None and path.stat().st_mtime > _dt.datetime.fromisoformat(created).timestamp()
        except ValueError:
            changed = False
    if not changed:
        return None
    return (f"the manifest {shell_path(path)} changed since job {job.id} was planned ({job.data.get('created')});"
            f" retry renders the traces as they were planned then (farm run {shell_path(path)} plans it anew)")


def cmd_retry(args) -> int:
    if not (args.failed or args.pending):
        raise SystemExit("farm retry: say what to run again: --failed and/or --pending")
    ref = job_ref(args.job, args.out)
    note = manifest_change(JobState.load(ref, args.out))
    if note:
        print(f"note: {note}", file=sys.stderr)
    job = retry_job(ref, out=args.out, failed=args.failed, pending=args.pending, broker=args.broker,
                    workers=args.workers, progress=False if args.no_progress else None, inputs=args.inputs)
    if args.failed:
        for model in job.unloadable():
            print(f"farm retry: nothing a retry can fix for {model}, which does not load: {CAUSE_HINTS[UNLOADABLE]}",
                  file=sys.stderr)
    return _finish_job(job, "retry")


def cmd_nightly(args) -> int:
    """farm nightly run-now | beat-command | index (farm.flows.nightly)."""
    reports = getattr(args, "reports", None)
    settings = nightly_settings(manifest=args.manifest, out=args.out, reports=reports)
    if args.action == "index":
        reports = reports or (settings or {}).get("reports") or default_reports(out=args.out)
        print(f"wrote {write_index(reports)}")
        return 0
    if settings is None:
        raise UsageError("which manifest? pass --manifest FILE or set FARM_NIGHTLY_MANIFEST")
    if args.action == "beat-command":
        broker = broker_url(args.broker)
        if broker is None:
            raise UsageError("beat and its workers need a broker: pass --broker redis://HOST:6379/0, set"
                             " FARM_BROKER_URL or farm.toml's broker")
        print(beat_command(settings, broker))
        return 0
    status = run_nightly(settings["manifest"], reports=settings["reports"], goldens=args.goldens or settings["goldens"],
                         out=settings["out"], broker=args.broker, workers=args.workers, allow_new=args.allow_new,
                         notify_to=args.notify, image_base=args.image_base, inputs=args.inputs)
    print(f"nightly {status['date']}: {status['status']}" + (f" ({status['job']})" if status.get("job") else ""))
    for problem in status.get("problems") or []:
        print(f"problem: {problem}")
    if status.get("report"):
        print(f"report: {Path(settings['reports']) / status['report']}")
    print(f"index: {Path(settings['reports']) / 'index.html'}")
    if status.get("notify"):
        n = status["notify"]
        print(f"notified {n['target']}: {'ok' if n['ok'] else 'FAILED'} ({n['detail']})")
    return {"pass": 0, "fail": 1}.get(status["status"], 2)


def add_run_options(s) -> None:
    """The comparison options of `farm run`."""
    g = s.add_argument_group("comparison with goldens (when the manifest has goldens, or with --goldens)")
    g.add_argument("--goldens", help="goldens folder (default: $FARM_GOLDENS, else next to the manifest)")
    g.add_argument("--allow-new", action="store_true", help="traces without a golden do not fail the run")
    g.add_argument("-o", "--output", "--report", dest="report", metavar="DIR",
                   help="write the HTML report, junit.xml and summary.md there (this command's output folder)")
    g.add_argument("--no-compare", action="store_true", help="render only, even when goldens exist")
    g.add_argument("--update-goldens", nargs="?", const="new", choices=sorted(UPDATE_MODES), metavar="new|failed|all",
                   help="after comparing, approve the traces that are new (default), failed, or all of them, as the"
                        " goldens (creates <manifest folder>/goldens when there are none); e.g. the first run:"
                        " farm run job.toml --update-goldens")
    g.add_argument("--allow-blank", action="store_true", help="with --update-goldens: approve blank frames too"
                                                             " (marked as blank in the goldens and reports)")
    g.add_argument("--allow-missing", action="store_true", help="with --update-goldens: approve frames that drew"
                                                               " placeholders for missing assets too (marked with"
                                                               " those assets in the goldens and reports)")
    add_summary_args(g)


def add_parsers(sub) -> None:
    s = sub.add_parser("run", help="render a job manifest (local process pool, or Celery workers with a broker)")
    s.add_argument("manifest", help="job manifest (TOML)")
    s.add_argument("--job-id", help="name the job (default: NAME-DATE-TIME-XXXX)")
    s.add_argument("--json", action="store_true", help="print one JSON object: the run's counts and its comparison"
                                                       " (the summary goes to stderr)")
    add_runner_options(s)
    add_run_options(s)
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("status", help="show a job's frames: done, failed (with the reason), pending")
    s.add_argument("job", help=RUN_HELP)
    s.add_argument("--out", help="output store (default: $FARM_OUT, farm.toml's store, ./farm-out)")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.add_argument("--limit", type=int, default=20, help="failed frames to list (default 20)")
    s.set_defaults(func=cmd_status)

    s = sub.add_parser("retry", help="render a job's failed (or unfinished) frames again")
    s.add_argument("job", help=RUN_HELP)
    s.add_argument("--failed", action="store_true", help="frames that failed")
    s.add_argument("--pending", action="store_true", help="frames that never finished (an interrupted run)")
    add_runner_options(s)
    s.set_defaults(func=cmd_retry)
    s = sub.add_parser("nightly", help="the nightly run: run-now (here, at once), beat-command (the shell lines that"
                                        " start it: the broker, celery beat with its schedule file in the state"
                                        " folder, a worker for both queues), index (rewrite index.html)")
    s.add_argument("action", choices=("run-now", "beat-command", "index"), help="what to do (see above)")
    s.add_argument("--manifest", help="the manifest (default: $FARM_NIGHTLY_MANIFEST)")
    s.add_argument("--reports", metavar="DIR", help="dated reports, status files and index.html (default:"
                                                    " $FARM_NIGHTLY_REPORTS, else STORE/nightly)")
    s.add_argument("--goldens", help="goldens folder (default: $FARM_NIGHTLY_GOLDENS, else next to the manifest)")
    s.add_argument("--notify", metavar="CMD|URL", help="after the night: a shell command line (run by /bin/sh -c,"
                                                       " summary on stdin) or an http(s) URL (POST of the status"
                                                       " JSON) (default:"
                                                       " $FARM_NIGHTLY_NOTIFY)")
    s.add_argument("--allow-new", action="store_true", help="traces without a golden do not fail the night")
    s.add_argument("--image-base", type=image_base_arg, metavar="URL",
                   help="the http(s) URL where --reports is published: each night's summary.md links its images"
                        " under URL/DATE/ (without it the summary has no image links)")
    add_runner_options(s)
    s.set_defaults(func=cmd_nightly)

    s = sub.add_parser("demo", help="render the sample models (goldens/manifest.toml) locally, compare them with"
                                     " the committed goldens, write the report")
    s.add_argument("--out", default="demo-out", help="models, store/ and report/ go here (default demo-out)")
    s.add_argument("--goldens", help="the goldens folder with manifest.toml (default: the repository's goldens/)")
    s.add_argument("--workers", type=workers_arg, help="local processes (default: one per core)")
    s.set_defaults(func=cmd_demo)
