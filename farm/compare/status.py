"""The statuses a comparison gives a trace: their names, groups, order and labels, in one place.

Against goldens (`compare_run`): ``pass``, ``fail``, ``rejected`` (an image rejected before),
``new`` (no golden yet), ``error`` (did not render). Between two runs (`diff_runs`): ``unchanged``,
``changed``, ``added``, ``removed``, ``error``. Reports, summaries, JUnit and the CLI read every
list, order and label from here, and the words for a results document's verdict (`verdict_word`:
the report's header, the terminal summary, the Markdown summary) and what a trace is to a test
report (`outcome`: an error, a failure, skipped or passed; new traces fail unless allowed, as the
verdict has it).

Why a job's frame failed when a retry cannot help (a trace's ``cause``) is farm.plan.causes.
"""

from __future__ import annotations

__all__ = [
    "DIFF_STATUSES",
    "FAILING",
    "FRESH",
    "GOLDEN_STATUSES",
    "GROUPS",
    "GROUP_ORDER",
    "LABELS",
    "PASSING",
    "REPORT_ORDER",
    "STATUS_ORDER",
    "VERDICT_WORDS",
    "group_of",
    "outcome",
    "statuses",
    "verdict_word",
]

# Summary order (counts tables, one-line summaries): problems first.
GOLDEN_STATUSES = ("fail", "rejected", "error", "new", "pass")
DIFF_STATUSES = ("changed", "added", "removed", "error", "unchanged")
# The report's filter buttons, in this order.
REPORT_ORDER = ("error", "rejected", "fail", "changed", "new", "added", "removed", "pass", "unchanged")

# Report grouping: failures, then new, then passed. Each status belongs to one group.
GROUPS = {
    "error": "failed", "rejected": "failed", "fail": "failed", "changed": "failed",
    "new": "new", "added": "new", "removed": "new",
    "pass": "passed", "unchanged": "passed",
}
GROUP_ORDER = {"failed": 0, "new": 1, "passed": 2}
STATUS_ORDER = {"error": 0, "rejected": 1, "fail": 2, "changed": 2, "added": 3, "new": 3, "removed": 4,
                "pass": 5, "unchanged": 5}
LABELS = {
    "fail": "failed", "rejected": "rejected", "error": "error", "new": "new", "pass": "passed",
    "changed": "changed", "added": "added", "removed": "removed", "unchanged": "unchanged",
}
FAILING = frozenset(s for s, g in GROUPS.items() if g == "failed")  # fail, rejected, error, changed
FRESH = frozenset(s for s, g in GROUPS.items() if g == "new")  # new, added, removed
PASSING = frozenset(s for s, g in GROUPS.items() if g == "passed")  # pass, unchanged


# A results document's verdict ("pass"/"fail" against goldens, "same"/"changed" between two runs) as
# each surface writes it: (report header, terminal summary, Markdown summary). Anything but "pass"
# ("same" for a diff) reads as the failing word of its kind.
VERDICT_WORDS = {
    "pass": ("PASSED", "PASSED", "✅ passed"),
    "fail": ("FAILED", "FAILED", "❌ failed"),
    "same": ("No changes", "no changes", "✅ no changes"),
    "changed": ("Changes found", "CHANGED", "⚠️ changes found"),
}
_SURFACES = ("report", "text", "markdown")


def verdict_word(results, surface: str) -> str:
    """The verdict of a results document as `surface` ("report", "text" or "markdown") writes it."""
    if results.get("kind") == "diff":
        verdict = "same" if results.get("verdict") == "same" else "changed"
    else:
        verdict = "pass" if results.get("verdict") == "pass" else "fail"
    return VERDICT_WORDS[verdict][_SURFACES.index(surface)]


def outcome(status: str, allow_new: bool = False) -> str | None:
    """What a trace of `status` is to a test report: "error" (did not render), "failure", "skipped"
    (new traces the comparison allowed, a diff's added and removed traces) or None (passed)."""
    if status == "error":
        return "error"
    if status in FAILING:
        return "failure"
    if status == "new":
        return "skipped" if allow_new else "failure"
    if status in FRESH:
        return "skipped"
    return None


def group_of(status: str) -> str:
    return GROUPS.get(status, "failed")


def statuses(kind: str | None) -> tuple[str, ...]:
    """The statuses of a results document of `kind` ("goldens" or "diff"), in summary order."""
    return DIFF_STATUSES if kind == "diff" else GOLDEN_STATUSES

