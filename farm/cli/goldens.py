"""The golden-image commands of `farm`: compare, approve, reject, goldens, report, serve, diff.

Exit statuses: 0 when the comparison passed (or a command did what it was asked), 1 when it failed
(or `farm goldens` found stale or missing goldens, or `farm diff` found changes), 2 for usage errors
(a missing run, no goldens folder, nothing selected).

Where the goldens are: ``--goldens DIR``, else $FARM_GOLDENS, else next to the run's manifest
(its folder when it holds index.jsonl, else its goldens/ subfolder when that does). approve and
reject also take a published report (a folder or URL, farm.report.published) instead of a run:
its goldens are where the report says, relative to the git work tree's root.
"""

from __future__ import annotations

import argparse
import json
import sys
import webbrowser
from pathlib import Path

from farm import goldens as G
from farm.cli.common import (
    RUN_HELP,
    UsageError,
    add_summary_args,
    confirm,
    goldens_dir,
    load_job,
    print_results,
    write_reports,
)
from farm.compare.runs import diff_runs, results_for
from farm.plan.batches import expand_manifest
from farm.plan.keys import legacy_key
from farm.plan.manifest import load_manifest
from farm.report.published import ReportError, ReportRun, is_report, open_report
from farm.serve.server import serve

__all__ = ["EXAMPLES", "add_parsers"]

EXAMPLES = {
    "compare": ["farm compare latest", "farm compare latest -o report/ --json",
                "farm compare JOB --goldens goldens/ --allow-new --image-base https://ci.example/job/7/report/"],
    "approve": ["farm approve latest --new                 # every trace without a golden",
                "farm approve latest --trace crate.mdx     # every trace of that model (any part of the key)",
                "farm approve latest --trace '*|Walk|*' --env",
                "farm approve farm-report --failed         # from a report folder CI uploaded (an artifact)",
                "farm approve https://ci.example/job/7/report/ --new",
                "farm approve --undo 12 --yes              # reverse decision #12 (farm goldens log)",
                "farm approve --redo 12 --yes"],
    "reject": ["farm reject latest --trace 'crate.mdx|Stand' --reason 'texture missing'"],
    "goldens": ["farm goldens", "farm goldens log --json", "farm goldens --stale nightly.toml --prune"],
    "report": ["farm report latest -o report/ --image-base https://ci.example/job/7/report/"],
    "serve": ["farm serve latest --open", "farm serve JOB --port 0 --by 'Ann <ann@example.com>'"],
    "diff": ["farm diff BASE_JOB latest -o diff-report/", "farm diff main-job pr-job --base-out main-store --json"],
}


# --------------------------------------------------------------------------------------------
# Commands


def _compare_and_print(args, report_dir) -> dict:
    """Compare the run with its goldens, write the reports to report_dir (if any), print the summary."""
    job = load_job(args.run, args.out)
    folder = goldens_dir(args.goldens, job)
    results = results_for(job, folder, allow_new=args.allow_new, fresh=args.fresh)
    del job  # the report needs the results only: the job's traces are not held while it is written
    html = write_reports(results, report_dir, args.image_base, args.report_url)
    print_results(results, getattr(args, "json", False), limit=args.limit, report=html)
    return results


def cmd_compare(args) -> int:
    results = _compare_and_print(args, args.report)
    return 0 if results["verdict"] == "pass" else 1


def _print_record(verb: str, rec: dict | None, skipped: list[str], folder: Path) -> None:
    for s in skipped:
        print(f"skipped: {s}", file=sys.stderr)
    if rec is None:
        print(f"farm {verb}: nothing changed in {folder}")
        return
    for ch in rec["changes"]:
        scope = "generic" if ch["env"] == "*" else f"env {ch['env']}"
        after = ch.get("after") or {}
        if verb == "approve":
            digests = ", ".join(a["digest"][:12] + "..." for a in after.get("approved", []))
            print(f"approved {ch['trace']} [{scope}]: {digests}")
        else:
            print(f"rejected {ch['trace']} [{scope}]")
    log = folder / G.LOG_NAME
    print(f"{len(rec['changes'])} trace(s) {'approved' if verb == 'approve' else 'rejected'} by {rec['by']}"
          f" (decision #{rec['id']} in {log}); undo with: farm approve --undo {rec['id']} --goldens {folder}")


def _decision_arg(text: str) -> int:
    try:
        n = int(str(text).lstrip("#"))
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"a decision id is a whole number >= 1 (see `farm goldens log`), not"
                                         f" {text!r}")
    return n


def _scope(env: str) -> str:
    return "generic" if env == G.GENERIC else env


def _undo_or_redo(args, by: str) -> int:
    redo = args.redo is not None
    if args.run or args.trace or args.new or args.failed or args.all:
        raise UsageError(f"--{'redo' if redo else 'undo'} takes no run or selection: it works on a decision in the"
                         f" goldens folder (`farm goldens log` lists them)")
    folder = goldens_dir(args.goldens, None)
    decision = None if args.undo is None or args.undo is True else args.undo
    if redo:
        plan, notes = G.redo(folder, args.redo, by=by, dry_run=True)
        target = G.redo_target(folder, args.redo)
    else:
        plan, notes = G.undo(folder, by=by, decision=decision, dry_run=True)
        target = G.undo_target(folder, decision) if plan is not None else None
    if plan is None:
        for n in notes:
            print(n)
        return 1
    verb = "redo" if redo else "undo"
    print(f"{verb} {target['action']} #{target['id']} by {target.get('by')} at {target.get('at')}"
          + (f" (run {target['run']})" if target.get("run") else "") + f": {len(plan['changes'])} line(s)")
    for ch in plan["changes"]:
        print(f"  {'restore' if not redo else 'reapply'} {ch['trace']} [{_scope(ch['env'])}]")
    for n in notes:
        print(f"  {n}", file=sys.stderr)
    if not plan["changes"]:
        print(f"farm approve --{verb}: nothing to change (every line changed again since)")
        return 1
    flag = f"--{verb} {target['id']}"
    if not confirm(f"{verb} decision #{target['id']} in {folder}?", args.yes,
                   f"farm approve {flag} changes {len(plan['changes'])} golden line(s) and stdin is not a terminal"
                   f" to confirm it: pass --yes (farm approve {flag} --yes --goldens {folder})"):
        print("nothing changed")
        return 1
    if redo:
        rec, _ = G.redo(folder, args.redo, by=by)
    else:
        rec, _ = G.undo(folder, by=by, decision=target["id"])
    for ch in rec["changes"]:
        print(f"{'restored' if not redo else 'reapplied'} {ch['trace']} [{_scope(ch['env'])}]")
    if redo:
        print(f"redid {target['action']} #{target['id']} ({len(rec['changes'])} trace(s)) in {folder} (decision"
              f" #{rec['id']})")
    else:
        print(f"undid {target['action']} #{target['id']} ({len(rec['changes'])} trace(s)) in {folder} (decision"
              f" #{rec['id']}; put it back with: farm approve --redo {target['id']} --goldens {folder})")
    return 0


def _report_run(ref: str, explicit_goldens: str | None):
    """A published report (farm.report.published) and the goldens folder its decision goes to:
    --goldens, else $FARM_GOLDENS or farm.toml's, else where the report says they are (relative to
    the git work tree's root), else next to its manifest."""
    try:
        job = open_report(ref)
    except ReportError as e:
        raise UsageError(str(e)) from None
    folder = G.find_goldens(None, explicit_goldens) or job.goldens or G.find_goldens(job.data.get("manifest"))
    if folder is None:
        raise UsageError(f"{job.source.shown} does not say where its goldens are: pass --goldens DIR (created when"
                         f" missing)")
    return job, folder


def _fetch(job, keys: list[str]) -> None:
    """A report's images of `keys`, checked (nothing is written when one does not match)."""
    if isinstance(job, ReportRun):
        try:
            job.fetch(keys)
        except ReportError as e:
            raise UsageError(str(e)) from None


def _approval_run(args):
    """The run (a job in a store, or a published report) and goldens folder of approve/reject."""
    if is_report(args.run):
        return _report_run(args.run, args.goldens)
    job = load_job(args.run, args.out)
    folder = goldens_dir(args.goldens, job, required=False)
    if folder is None:
        raise UsageError(f"no golden index next to {job.data.get('manifest')}: pass --goldens DIR (created when"
                         f" missing)")
    return job, folder


def cmd_approve(args) -> int:
    by = G.default_user(args.by)
    if args.undo is not None or args.redo is not None:
        return _undo_or_redo(args, by)
    if not args.run:
        raise UsageError("say which run: farm approve RUN [--trace PATTERN] [--new] [--failed] [--all]")
    if not (args.trace or args.new or args.failed or args.all):
        raise UsageError("say what to approve: --trace PATTERN, --new, --failed or --all (nothing is approved by"
                         " default)")
    job, folder = _approval_run(args)
    statuses = None
    results = None
    if not args.all and (args.new or args.failed):
        results = job.results if isinstance(job, ReportRun) else results_for(job, folder)
        statuses = ({"new"} if args.new else set()) | ({"fail"} if args.failed else set())
    keys = G.select_traces(job, args.trace or (), statuses, results)
    if not keys:
        print(f"farm approve: no trace of run {job.id} matches the selection", file=sys.stderr)
        return 1
    _fetch(job, keys)
    rec, skipped = G.approve(folder, job, keys, by=by, env_scope=args.env, add=args.add, allow_blank=args.allow_blank,
                             allow_missing=args.allow_missing)
    _print_record("approve", rec, skipped, folder)
    return 0 if rec is not None or not skipped else 1


def cmd_reject(args) -> int:
    job, folder = _approval_run(args)
    keys = G.select_traces(job, args.trace)
    if not keys:
        print(f"farm reject: no trace of run {job.id} matches {', '.join(args.trace)}", file=sys.stderr)
        return 1
    _fetch(job, keys)
    rec, skipped = G.reject(folder, job, keys, by=G.default_user(args.by), reason=args.reason, env_scope=args.env)
    _print_record("reject", rec, skipped, folder)
    return 0 if rec is not None or not skipped else 1


def _log_rows(index) -> list[dict]:
    log = index.log()
    state = G.decision_states(log)
    rows = []
    for rec in log:
        action = rec.get("action")
        rows.append({"id": rec.get("id"), "at": rec.get("at"), "by": rec.get("by"), "action": action,
                     "count": len(rec.get("changes", [])), "run": rec.get("run"),
                     "of": rec.get("undoes") or rec.get("redoes"),
                     "undone_by": state.get(rec.get("id")) or None if action in G.DECISIONS else None})
    return rows


def _log_line(r: dict) -> str:
    what = f"{r['action']} of #{r['of']}" if r["of"] else r["action"]
    run = f", run {r['run']}" if r.get("run") else ""
    undone = f" (undone by #{r['undone_by']})" if r.get("undone_by") else ""
    return f"#{r['id']:<4} {r['at']}  {r['by']}: {what}, {r['count']} trace(s){run}{undone}"


def cmd_goldens_log(args, folder: Path, index) -> int:
    rows = _log_rows(index)
    if args.limit:  # the log lists every decision unless --limit N asks for the last N
        rows = rows[-args.limit:]
    if args.json:
        print(json.dumps({"goldens": str(folder), "decisions": rows}, indent=2, sort_keys=True))
        return 0
    if not rows:
        print(f"{folder}: no decisions yet")
    for r in rows:
        print(_log_line(r))
    if rows:
        print(f"undo one with: farm approve --undo ID --goldens {folder} (asks first; --yes without a terminal)")
    return 0


def cmd_goldens(args) -> int:
    folder = goldens_dir(args.goldens, None, manifest=args.stale)
    index = G.GoldenIndex.load(folder)
    if args.what == "log":
        return cmd_goldens_log(args, folder, index)
    args.limit = 5 if args.limit is None else args.limit
    if args.stale:
        traces = expand_manifest(load_manifest(args.stale)).traces
        keys = set(traces)
        legacy = {k: legacy_key(k, t.get("time_ms")) for k, t in traces.items()}  # what older goldens are under
        report = G.stale(folder, keys, legacy)
        for trace, env in report.entries:
            scope = "generic" if env == "*" else env
            print(f"stale: {trace} [{scope}] (no trace of {args.stale} renders it)")
        for p in report.images:
            print(f"unreferenced image: {p}")
        for d in report.missing:
            print(f"missing image: {index.image_path(d)}")
        if args.prune and (report.entries or report.images):
            rec, removed = G.prune(folder, keys, by=G.default_user(args.by), legacy=legacy)
            n = len(rec["changes"]) if rec else 0
            undo = f"farm approve --undo {rec['id']} --goldens {folder}" if rec else "nothing to undo"
            print(f"pruned {n} line(s) (undo with: {undo}) and {len(removed)}"
                  f" image(s)")
            return 0
        if not report.anything and not report.missing:
            print(f"{folder}: every golden is used by {args.stale} ({len(keys)} traces)")
            return 0
        if report.anything:
            print(f"{len(report.entries)} stale line(s), {len(report.images)} unreferenced image(s); remove them"
                  f" with: farm goldens --stale {args.stale} --goldens {folder} --prune")
        return 1
    traces = index.traces()
    envs = sorted(e for e in index.envs() if e != G.GENERIC)
    missing = index.missing_images()
    marked = index.marked()
    if args.json:
        print(json.dumps({"goldens": str(folder), "traces": len(traces), "lines": len(index.entries),
                          "approved_images": len(index.referenced_images()), "marked": marked,
                          "environments": envs, "missing_images": [str(index.image_path(d)) for d in missing],
                          "decisions": _log_rows(index)[-args.limit:] if args.limit else []},
                         indent=2, sort_keys=True))
        return 1 if missing else 0
    print(f"{folder}: {len(traces)} traces, {len(index.entries)} lines, {len(index.referenced_images())} approved"
          f" images, {sum(len(e['rejected']) for e in index.entries.values())} rejected digests")
    if marked:
        n_missing, n_blank = sum(1 for m in marked if m["missing"]), sum(1 for m in marked if m["blank"])
        print(f"  {len(marked)} approved image(s) marked: {n_missing} drawn with placeholders for missing assets,"
              f" {n_blank} blank (they show what was drawn then; `farm goldens --json` lists them)")
    for e in envs:
        print(f"  environment-specific goldens for: {e}")
    for d in missing:
        print(f"missing image: {index.image_path(d)}")
    for r in _log_rows(index)[-args.limit:] if args.limit else []:
        print(f"  {_log_line(r)}")
    return 1 if missing else 0


def cmd_report(args) -> int:
    _compare_and_print(args, args.output)
    return 0


def port_arg(text: str) -> int:
    """--port: an integer from 0 (any free port) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, not {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, not {value}")
    return value


def cmd_serve(args) -> int:
    job = load_job(args.run, args.out)
    folder = goldens_dir(args.goldens, job, required=False)
    if folder is None:
        raise UsageError(f"no golden index next to {job.data.get('manifest')}: pass --goldens DIR (created by the"
                         f" first approval)")

    def ready(url: str) -> None:
        print(f"farm serve: {job.id} against {folder} on {url} (Ctrl-C stops)", flush=True)
        if args.open:
            webbrowser.open(url)

    try:
        serve(job, folder, host=args.host, port=args.port, by=args.by, allow_new=args.allow_new, ready=ready)
    except KeyboardInterrupt:
        return 0
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot serve on {args.host}:{args.port}: {e}") from None
    return 0


def cmd_diff(args) -> int:
    base = load_job(args.base, args.base_out or args.out)
    head = load_job(args.head, args.head_out or args.out)
    results = diff_runs(base, head)
    html = write_reports(results, args.output, args.image_base, args.report_url)
    print_results(results, args.json, limit=args.limit, report=html)
    return 0 if results["verdict"] == "same" else 1


# --------------------------------------------------------------------------------------------
# Parsers

DECISION_RUN_HELP = (f"{RUN_HELP}; or a published report: its folder (what CI uploads: results.json, img/) or its"
                     f" http(s) URL (the images come from the report, checked against its results; --out is not"
                     f" used)")


def _run_args(s) -> None:
    s.add_argument("--out", help="the run's store (default: $FARM_OUT, farm.toml's store, ./farm-out)")
    s.add_argument("--goldens", help="goldens folder (default: $FARM_GOLDENS, farm.toml's goldens, else next to the"
                                     " run's manifest)")


def _comparison_args(s) -> None:
    """What compare and report share: new traces, the summary's links, reuse, how many are listed."""
    s.add_argument("--allow-new", action="store_true", help="traces without a golden do not fail")
    add_summary_args(s)
    s.add_argument("--fresh", action="store_true", help="compare again even when comparison.json is current")
    s.add_argument("--limit", type=int, default=20, help="traces to list (default 20)")


def add_parsers(sub) -> None:
    _add_compare(sub)
    _add_approve(sub)
    _add_reject(sub)
    _add_goldens(sub)
    _add_report(sub)
    _add_serve(sub)
    _add_diff(sub)


def _add_compare(sub) -> None:
    s = sub.add_parser("compare", help="compare a run with its goldens (exit 1 on failures and new traces)")
    s.add_argument("run", metavar="RUN", help=RUN_HELP)
    _run_args(s)
    s.add_argument("-o", "--output", "--report", dest="report", metavar="DIR",
                   help="write the HTML report, junit.xml and summary.md there (this command's output folder)")
    s.add_argument("--json", action="store_true", help="print the verdict, counts and each trace's status as JSON")
    _comparison_args(s)
    s.set_defaults(func=cmd_compare)


def _add_approve(sub) -> None:
    s = sub.add_parser("approve", help="approve the images a run stored, or a published report holds, as goldens (or"
                                       " --undo/--redo a decision)")
    s.add_argument("run", metavar="RUN|REPORT", nargs="?", help=DECISION_RUN_HELP)
    _run_args(s)
    s.add_argument("--trace", action="append", metavar="PATTERN", help="traces whose key contains PATTERN anywhere"
                                                                        " (a substring, or a glob such as '*|Walk|*';"
                                                                        " repeatable)")
    s.add_argument("--new", action="store_true", help="the traces that have no golden yet")
    s.add_argument("--failed", action="store_true", help="the traces that differ from their goldens (not those"
                                                         " that rendered a rejected image: name those with --trace)")
    s.add_argument("--all", action="store_true", help="every trace that rendered")
    s.add_argument("--env", action="store_true", help="approve for the rendering environment only (GL renderer,"
                                                      " driver version, CPU vendor), not as the generic golden")
    s.add_argument("--add", action="store_true", help="keep the earlier approved images too (a trace with more"
                                                      " than one correct output)")
    s.add_argument("--allow-blank", action="store_true", help="approve blank frames too (fully transparent, or every"
                                                              " pixel one value: skipped by default)")
    s.add_argument("--allow-missing", action="store_true", help="approve frames that drew placeholders for missing"
                                                               " assets too (a checker where a texture should be)")
    s.add_argument("--by", help="who approves (default: $FARM_USER, git user.name/email, $USER)")
    s.add_argument("--undo", nargs="?", const=True, type=_decision_arg, metavar="ID",
                   help="reverse decision ID (`farm goldens log` lists them), or without ID the last approve/reject/"
                        "prune still in effect; shows what it reverts and asks (or --yes)")
    s.add_argument("--redo", type=_decision_arg, metavar="ID", help="put an undone decision ID back in effect")
    s.add_argument("--yes", "-y", action="store_true", help="do not ask before --undo/--redo (needed without a"
                                                            " terminal)")
    s.set_defaults(func=cmd_approve)


def _add_reject(sub) -> None:
    s = sub.add_parser("reject", help="mark the images a run stored (or a published report holds) as known-bad for"
                                      " their traces")
    s.add_argument("run", metavar="RUN|REPORT", help=DECISION_RUN_HELP)
    _run_args(s)
    s.add_argument("--trace", action="append", required=True, metavar="PATTERN",
                   help="traces whose key contains PATTERN anywhere (substring or glob; repeatable)")
    s.add_argument("--reason", help="why (shown when a later run renders the same image)")
    s.add_argument("--env", action="store_true", help="reject for the rendering environment only")
    s.add_argument("--by", help="who rejects (default: $FARM_USER, git user.name/email, $USER)")
    s.set_defaults(func=cmd_reject)


def _add_goldens(sub) -> None:
    s = sub.add_parser("goldens", help="what a goldens folder holds; `goldens log`: the decisions; --stale MANIFEST:"
                                       " goldens no trace uses")
    s.add_argument("what", nargs="?", choices=["log"], help="log: list every decision (id, time, who, action, traces,"
                                                            " run), the ids --undo/--redo take")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.add_argument("--goldens", help="goldens folder (default: $FARM_GOLDENS, next to --stale's manifest, ./goldens)")
    s.add_argument("--stale", metavar="MANIFEST", help="list goldens of traces the manifest no longer renders, and"
                                                       " images no golden uses (exit 1 when there are any)")
    s.add_argument("--prune", action="store_true", help="with --stale: remove them (lines can be restored by"
                                                        " farm approve --undo)")
    s.add_argument("--by", help="who prunes (default: $FARM_USER, git user.name/email, $USER)")
    s.add_argument("--limit", type=int, help="recent decisions to list (default 5; `goldens log`: all)")
    s.set_defaults(func=cmd_goldens)


def _add_report(sub) -> None:
    s = sub.add_parser("report", help="write a run's HTML report, junit.xml and summary.md")
    s.add_argument("run", metavar="RUN", help=RUN_HELP)
    s.add_argument("-o", "--output", required=True, metavar="DIR", help="report folder")
    _run_args(s)
    _comparison_args(s)
    s.set_defaults(func=cmd_report)


def _add_serve(sub) -> None:
    s = sub.add_parser("serve", help="the report on http://127.0.0.1:PORT/ with Approve and Reject buttons")
    s.add_argument("run", metavar="RUN", help=RUN_HELP)
    _run_args(s)
    s.add_argument("--port", type=port_arg, default=8765, help="port (default 8765; 0: any free port)")
    s.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1; any other"
                                                        " address only with FARM_SERVE_TOKEN)")
    s.add_argument("--by", help="who approves (default: $FARM_USER, git user.name/email, $USER)")
    s.add_argument("--allow-new", action="store_true", help="traces without a golden do not fail")
    s.add_argument("--open", action="store_true", help="open the page in a browser")
    s.set_defaults(func=cmd_serve)


def _add_diff(sub) -> None:
    s = sub.add_parser("diff", help="compare two runs: changed, added and removed traces (exit 1 on changes)")
    s.add_argument("base", metavar="BASE", help="the run before (job id, jobs/<id>.json, or 'latest')")
    s.add_argument("head", metavar="HEAD", help="the run after (job id, jobs/<id>.json, or 'latest')")
    s.add_argument("-o", "--output", metavar="DIR", help="write the HTML report, junit.xml and summary.md there")
    s.add_argument("--json", action="store_true", help="print the verdict, counts and each trace's status as JSON")
    s.add_argument("--out", help="store of both runs (default: $FARM_OUT, farm.toml's store, ./farm-out)")
    s.add_argument("--base-out", help="BASE's store, when it differs")
    s.add_argument("--head-out", help="HEAD's store, when it differs")
    add_summary_args(s)
    s.add_argument("--limit", type=int, default=20, help="traces to list (default 20)")
    s.set_defaults(func=cmd_diff)
