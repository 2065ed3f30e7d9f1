"""The report's view model: how traces are sorted and labelled, the approve commands, the metric
rows. html, markdown, junit and the CLI summary all use these (statuses themselves: farm.compare.status).

The report only shows what the comparison decided: each metric's check (its limit and whether it
passed) comes from the results (farm.compare.metrics.metric_checks), the verdict's words from
farm.compare.status.verdict_word; nothing here holds a metric against a threshold.
"""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from farm.compare.metrics import metric_checks
from farm.compare.status import GROUP_ORDER, LABELS, REPORT_ORDER, STATUS_ORDER, group_of, verdict_word
from farm.compare.table import LazyTraces

__all__ = ["MARK_FLAGS", "approve_command", "approve_flags", "bulk_commands", "compact_cells", "counts_view",
           "metric_rows",
           "report_order", "shell_path", "sort_traces", "trace_rank"]


def shell_path(path: str | Path) -> str:
    """A path for a command line: relative to the current folder when inside it, else absolute."""
    return _shell_path(str(path), os.getcwd())


@functools.lru_cache(maxsize=64)
def _shell_path(path: str, cwd: str) -> str:
    # cached: a report writes the same --out and --goldens into two commands a card
    p = Path(cwd, path)
    try:
        rel = p.relative_to(cwd)
    except ValueError:
        return str(p)
    return rel.as_posix() or "."


MARK_FLAGS = {"missing": "--allow-missing", "blank": "--allow-blank"}  # a frame's mark -> the flag approving it
_SELECTED = {"--new": "new", "--failed": "fail"}  # a selection flag -> the status it selects


def approve_flags(results: dict, key: str | None = None, extra: tuple = ()) -> list[str]:
    """The flags an approval of `key` (or of the statuses `extra` selects) needs so that every frame
    in it is approved as drawn: --allow-missing, --allow-blank (MARK_FLAGS)."""
    traces = results.get("traces", {})
    if key is not None:
        chosen = [traces[key]] if key in traces else []
    else:
        wanted = {_SELECTED[x] for x in extra if x in _SELECTED}
        chosen = [t for t in traces.values() if t.get("status") in wanted] if wanted else []
    return [flag for m, flag in MARK_FLAGS.items() if any(t.get(m) for t in chosen)]


def approve_command(results: dict, verb: str = "approve", key: str | None = None, extra: tuple = (),
                    source: str | None = None) -> str:
    """The exact `farm approve` (or reject) command for one trace (or, with `extra`, a selection),
    with the flags its frames need (`approve_flags`). `source`: a published report (its URL or
    folder, farm.report.published) instead of the run in its store."""
    parts = ["farm", verb, source or results["job"]]
    if key is not None:
        parts += ["--trace", key]
    parts += list(extra)
    if verb == "approve":
        parts += approve_flags(results, key, extra)
    if source is None:
        parts += ["--out", shell_path(results["store"])]
        if results.get("goldens"):
            parts += ["--goldens", shell_path(results["goldens"])]
    return " ".join(shlex.quote(str(p)) for p in parts)


def trace_rank(t: Mapping) -> tuple:
    """A trace's place in the report's order (`sort_traces`; unique: the key is its last part)."""
    m = t.get("metrics") or {}
    ssim = m.get("ssim")
    return (GROUP_ORDER[group_of(t["status"])], STATUS_ORDER.get(t["status"], 9),
            0 if t.get("match") == "similar" else 1,
            ssim if ssim is not None else -2.0, -(m.get("pixels_over") or 0.0), t.get("model") or "",
            str(t.get("sequence")), t.get("time_ms") or 0, t["key"])


def sort_traces(traces) -> list[dict]:
    """Failures first (then new, then passed); within a status the worst SSIM first."""
    return sorted(traces, key=trace_rank)


def report_order(traces: Mapping[str, Mapping]) -> LazyTraces:
    """The traces of a results mapping in `sort_traces` order, read one at a time as they are reached (a
    report of a million traces never holds them all as dicts: farm.compare.table)."""
    return LazyTraces(traces, [k for _, k in sorted((trace_rank(t), k) for k, t in traces.items())])


def _row(check: dict, value: str) -> dict:
    return {"name": check["name"], "value": value, "limit": check["limit"], "ok": check["passed"]}


def metric_rows(t: dict) -> list[dict]:
    m = t.get("metrics") or {}
    if not m:
        return []
    checks = metric_checks(m, t.get("thresholds"))
    ssim = m.get("ssim")
    return [
        _row(checks["ssim"], "-" if ssim is None else f"{ssim:.6f}"),
        {"name": "SSIM colour (premultiplied RGB)", "value": "-" if m.get("ssim_rgb") is None
         else f"{m['ssim_rgb']:.6f}", "limit": "", "ok": None},
        {"name": "SSIM alpha", "value": "-" if m.get("ssim_alpha") is None else f"{m['ssim_alpha']:.6f}",
         "limit": "", "ok": None},
        _row(checks["pixels_over"], f"{100 * (m.get('pixels_over') or 0.0):.3f}%"),
        {"name": "largest channel difference (0-255)", "value": str(m.get("max_diff")), "limit": "", "ok": None},
    ]


def compact_cells(t: dict) -> dict:
    """The compact list's cells of a trace: SSIM and the share of pixels off (text)."""
    m = t.get("metrics") or {}
    ssim = m.get("ssim")
    return {"ssim": "-" if ssim is None else f"{ssim:.4f}",
            "over": "-" if not m else f"{100 * (m.get('pixels_over') or 0.0):.2f}%"}


def bulk_commands(results: dict) -> list[list[str]]:
    """[label, command] for the header: one approval of every new and of every failed trace."""
    if results.get("kind") == "diff":
        return []
    counts = results.get("counts", {})
    out = []
    if counts.get("new"):
        out.append(["approve every new trace", approve_command(results, extra=("--new",))])
    if counts.get("fail"):
        out.append(["approve every failed trace", approve_command(results, extra=("--failed",))])
    return out


def counts_view(results: dict) -> dict:
    """Everything in the report's header that a decision can change, as the page shows it (the
    page, and `farm serve`'s answers, from which the page refreshes it in place): verdict word,
    [(status, count, label)] (the counts and the status filter's labels), totals, the problem
    lines, the bulk commands and how many failed traces have an image to approve."""
    counts = results.get("counts", {})
    traces = results.get("traces", {})
    return {"verdict": results.get("verdict"), "word": verdict_word(results, "report"),
            "counts": [[s, counts[s], LABELS.get(s, s)] for s in REPORT_ORDER if counts.get(s)],
            "total": counts.get("total", 0), "compared": results.get("compared", 0),
            "problems": list(results.get("problems", [])), "commands": bulk_commands(results),
            "failed_with_image": sum(1 for t in traces.values() if t.get("status") == "fail" and t.get("png"))}
