"""The comparison summary as the terminal shows it (farm compare, farm run, farm demo, farm diff)."""

from __future__ import annotations

from pathlib import Path

from farm.compare.status import PASSING, statuses, verdict_word
from farm.report.model import approve_command, sort_traces

__all__ = ["summary_text"]


def summary_text(results: dict, limit: int = 20, report: str | Path | None = None, approve: bool = True) -> str:
    """The terminal summary; `approve`: end with the commands that approve the new and failed traces
    (`farm run` leaves them out after a first run, whose bootstrap command it printed instead)."""
    c = results["counts"]
    diff = results.get("kind") == "diff"
    if diff:
        head = f"diff {results['base']['job']} -> {results['head']['job']}: {verdict_word(results, 'text')}"
    else:
        head = f"compare {results['job']}: {verdict_word(results, 'text')}"
    order = statuses(results.get("kind"))
    parts = ", ".join(f"{c[s]} {s}" for s in order if c.get(s))
    lines = [f"{head}: {parts or 'nothing'} of {c['total']} traces ({results['compared']} compared)"]
    interesting = sort_traces(t for t in results["traces"].values() if t["status"] not in PASSING)
    for t in interesting[:limit]:
        reason = f": {t['reason']}" if t.get("reason") and t["status"] != "new" else ""
        lines.append(f"  {t['status']:<8} {t['key']}{reason}")
        for ch in (t.get("inputs_changed") or [])[:5]:
            what = ("now missing" if ch["head"] is None else "was missing" if ch["base"] is None
                    else "new input" if ch["base"] == "absent" else "no longer used" if ch["head"] == "absent"
                    else f"changed ({str(ch['base'])[:8]} -> {str(ch['head'])[:8]})")
            lines.append(f"           {ch.get('kind', 'input')} {ch['asset']}: {what}")
    if len(interesting) > limit:
        lines.append(f"  ... and {len(interesting) - limit} more (see the report)")
    similar = sum(1 for t in results["traces"].values() if t.get("match") == "similar")
    if similar:
        lines.append(f"  ({similar} passed within the thresholds without being identical to their golden)")
    for p in results.get("problems", []):
        lines.append(f"problem: {p}")
    for n in results.get("notes", []):
        lines.append(f"note: {n}")
    if report:
        lines.append(f"report: {report}")
    if not diff and approve:
        if c.get("new"):
            lines.append(f"approve the new traces after review: {approve_command(results, extra=('--new',))}")
        if c.get("fail"):
            lines.append(f"approve the failed traces after review: {approve_command(results, extra=('--failed',))}")
    return "\n".join(lines)
