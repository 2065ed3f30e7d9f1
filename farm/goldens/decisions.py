"""Decisions on goldens: approve, reject, undo, stale, prune (the index itself is farm.goldens.index).

Approve and reject share one loop (`_decide`) over a run's stored images; each decision appends
one record to the log with every index line it changed before and after, so `undo` is exact (the
record and the index change take effect together: farm.goldens.index.locked).
Each returns the log record it appended (None: no change).
A run is a farm.run.jobs.JobState, or a published report (farm.report.published.ReportRun: the
images the report holds, checked against its results); the record names where it came from (the
store, or the report, its CI run and job).
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from farm.goldens.index import GENERIC, GoldenError, GoldenIndex, canonical_entry, entry_order, env_key, locked, now
from farm.images import blank_reason, image_digest, read_png
from farm.plan.keys import legacy_key

__all__ = ["DECISIONS", "Candidate", "StaleReport", "approve", "decision_states", "golden_marks", "matches", "prune",
           "redo", "redo_target", "reject", "run_candidates", "select_traces", "stale", "undo", "undo_target"]


@dataclass
class Candidate:
    """One trace of a run, as approve/reject see it: its stored PNG and what it shows."""

    trace: str
    png: str  # sha256 of the PNG bytes (the store's name)
    data: bytes
    digest: str  # pixel digest
    size: tuple[int, int]
    gl: dict | None
    blank: str | None = None  # farm.images.blank_reason of its pixels (None: something was drawn)
    missing: tuple = ()  # assets the frame drew placeholders for (the job's trace state)
    legacy: str | None = None  # the ms key a percent trace had before (farm.plan.keys.legacy_key)

    @property
    def env(self) -> str:
        return env_key(self.gl)


def golden_marks(c: Candidate) -> dict:
    """What an approval record keeps about a frame that did not draw the model as it is meant to
    look: the assets it drew placeholders for (``missing``) and why it is blank (``blank``); {} for
    a frame without either (its record is as before)."""
    marks: dict = {}
    if c.missing:
        marks["missing"] = list(c.missing)
    if c.blank:
        marks["blank"] = c.blank
    return marks


def run_candidates(job, keys: Iterable[str]) -> tuple[list[Candidate], list[str]]:
    """The stored images of `keys` in a run (farm.run.jobs.JobState); and sentences for those skipped."""
    out, skipped = [], []
    for key in keys:
        t = job.traces.get(key)
        if t is None:
            skipped.append(f"{key}: not a trace of run {job.id}")
            continue
        if t.get("status") != "done" or not t.get("digest"):
            skipped.append(f"{key}: did not render in run {job.id} ({t.get('error') or t.get('status')})")
            continue
        try:
            data = job.store.read_image(t["digest"])
        except OSError as e:
            skipped.append(f"{key}: its image {t['digest'][:12]}... is missing from the store ({e.strerror or e})")
            continue
        if hashlib.sha256(data).hexdigest() != t["digest"]:
            skipped.append(f"{key}: the stored image {t['digest'][:12]}... does not match its name; not approved")
            continue
        rgba, trace = read_png(data)
        digest, size = image_digest(rgba), (int(rgba.shape[1]), int(rgba.shape[0]))
        gl = (trace or {}).get("gl")
        if gl is None:
            try:
                gl = job.store.read_sidecar(t["digest"]).get("trace", {}).get("gl")
            except (OSError, ValueError):
                gl = None
        out.append(Candidate(key, t["digest"], data, digest, size, gl, blank_reason(rgba),
                             tuple(t.get("missing") or ()), legacy_key(key, t.get("time_ms"))))
    return out, skipped


def matches(key: str, pattern: str) -> bool:
    """Does `pattern` match any part of trace key `key` (substring, or a glob anywhere in it)?"""
    return pattern in key or fnmatch.fnmatchcase(key, pattern) or fnmatch.fnmatchcase(key, f"*{pattern}*")


def select_traces(job, patterns: Iterable[str] = (), statuses: Iterable[str] | None = None,
                  results: Mapping | None = None) -> list[str]:
    """Trace keys of a run matching any of `patterns` (all when none) and, when `statuses` is
    given, whose comparison status (from `results`) is one of them. A pattern matches any part of
    a key: as a substring (``crate.mdx``, ``|Walk|``) or as a glob anywhere in it (``crate*|Stand``)."""
    patterns = list(patterns)
    keys = sorted(job.traces)
    if patterns:
        keys = [k for k in keys if any(matches(k, p) for p in patterns)]
    if statuses is not None:
        wanted = set(statuses)
        traces = (results or {}).get("traces", {})
        keys = [k for k in keys if traces.get(k, {}).get("status") in wanted]
    return keys


def _record_base(action: str, by: str, job=None, note: str | None = None) -> dict:
    rec = {"action": action, "by": by, "at": now()}
    origin = getattr(job, "origin", None)  # a published report (farm.report.published.ReportRun): where it was
    if origin:
        rec.update(run=job.id, **origin)
    elif job is not None:
        store = Path(job.store.location)
        try:  # relative when under the current folder: the log is committed, home folders are not
            shown = store.relative_to(Path.cwd()).as_posix() if job.store.kind == "folder" else job.store.location
        except ValueError:
            shown = str(store)
        rec.update(run=job.id, store=shown)
    if note:
        rec["note"] = note
    return rec


def _decide(root: str | Path, job, keys: Iterable[str], action: str, *, by: str, env_scope: bool,
            change, note: str | None = None, refuse=None) -> tuple[dict | None, list[str]]:
    """The loop every decision on a run's images shares: for each stored image of `keys`, in its
    scope (generic, or with `env_scope` the environment that rendered it), `change(entry, c)` edits
    a copy of the index line (a percent trace without one: of its legacy key's, GoldenIndex.line; the
    decision writes the trace's own key) and returns True when the image must be copied in;
    lines that end up as they were are left alone; one log record lists every change. `refuse(c)`:
    a sentence for a candidate that must be skipped (else None)."""
    cands, skipped = run_candidates(job, keys)
    if refuse is not None:
        kept = []
        for c in cands:
            why = refuse(c)
            if why:
                skipped.append(why)
            else:
                kept.append(c)
        cands = kept
    changes = []
    with locked(root) as index:
        for c in cands:
            scope = c.env if env_scope else GENERIC
            before = index.entry(c.trace, scope)
            start = index.line(c.trace, scope, c.legacy)  # a percent trace's legacy line (index: Legacy keys)
            entry = canonical_entry({**start, "trace": c.trace} if start else {"trace": c.trace, "env": scope})
            needs_image = change(entry, c)
            after = canonical_entry(entry)
            if before is not None and canonical_entry(before) == after:
                continue
            if needs_image:
                index.put_image(c.data, c.png, c.digest)
            index.set_entry(c.trace, scope, after)
            changes.append({"trace": c.trace, "env": scope, "before": before, "after": index.entry(c.trace, scope)})
        if not changes:
            return None, skipped
        rec = index.append_log({**_record_base(action, by, job, note), "changes": changes})
    return rec, skipped


def approve(root: str | Path, job, keys: Iterable[str], *, by: str, env_scope: bool = False,
            add: bool = False, allow_blank: bool = False, allow_missing: bool = False) -> tuple[dict | None, list[str]]:
    """Approve the images run `job` stored for `keys`: exactly those bytes become the goldens.

    Scope: the generic golden (default) or, with `env_scope`, the golden of the environment that
    rendered each image. The approved image replaces the scope's earlier approvals unless `add`
    (then it is one more approved image: for a trace with more than one correct output). Its digest
    leaves the scope's rejected list. A blank frame (farm.images.blank_reason: fully transparent,
    or every pixel one value; most likely nothing was drawn) is skipped unless `allow_blank`, and a
    frame that drew placeholders for missing assets (a checker where a texture should be) unless
    `allow_missing`, so neither becomes a golden by accident; one that is approved stays marked in
    its approval record (`golden_marks`: ``"missing": [asset names]``, ``"blank": reason``), so every
    later comparison says its golden was drawn that way.
    Returns the log record (None when nothing changed) and sentences for traces that were skipped.
    """
    def refuse(c: Candidate) -> str | None:
        if c.blank and not allow_blank:
            return (f"{c.trace}: the frame is blank ({c.blank}); not approved (pass --allow-blank if that is"
                    f" what it should show)")
        if c.missing and not allow_missing:
            shown = ", ".join(c.missing[:3]) + (f" and {len(c.missing) - 3} more" if len(c.missing) > 3 else "")
            return (f"{c.trace}: the frame drew placeholders for missing assets ({shown}); not approved (pass"
                    f" --allow-missing if that is what it should show)")
        return None

    def change(entry: dict, c: Candidate) -> bool:
        approved = entry["approved"]
        old = next((a for a in approved if a["digest"] == c.digest), None)
        record = old or {"digest": c.digest, "png": c.png, "size": list(c.size), "by": by, "at": now(),
                         "run": job.id, "gl": c.gl or {}, **golden_marks(c)}
        if add:
            if old is None:
                approved.append(record)
        else:
            entry["approved"] = [record]
        entry["rejected"] = [r for r in entry["rejected"] if r["digest"] != c.digest]
        return old is None

    return _decide(root, job, keys, "approve", by=by, env_scope=env_scope, change=change, refuse=refuse)


def reject(root: str | Path, job, keys: Iterable[str], *, by: str, reason: str | None = None,
           env_scope: bool = False) -> tuple[dict | None, list[str]]:
    """Mark the images run `job` stored for `keys` as known-bad: a later frame with the same pixels
    fails, with `reason`. A rejected digest leaves the scope's approved list."""
    def change(entry: dict, c: Candidate) -> bool:
        if not any(r["digest"] == c.digest for r in entry["rejected"]):
            entry["rejected"].append({"digest": c.digest, "png": c.png, "by": by, "at": now(), "run": job.id,
                                      "reason": reason or "rejected in review"})
        entry["approved"] = [a for a in entry["approved"] if a["digest"] != c.digest]
        return False

    return _decide(root, job, keys, "reject", by=by, env_scope=env_scope, change=change, note=reason)


DECISIONS = ("approve", "reject", "prune")  # the log actions undo can reverse


def decision_states(log: list[dict]) -> dict[int, int]:
    """Per decision id, the id of the undo record that currently reverses it (0: in effect).
    An undo reverses a decision; a redo (of that decision) puts it back in effect."""
    state: dict[int, int] = {}
    for r in log:
        if r.get("action") in DECISIONS:
            state[r.get("id")] = 0
        elif r.get("action") == "undo":
            state[r.get("undoes")] = r.get("id")
        elif r.get("action") == "redo":
            state[r.get("redoes")] = 0
    return state


def _find(log: list[dict], decision: int) -> dict:
    rec = next((r for r in log if r.get("id") == decision), None)
    if rec is None:
        ids = [r.get("id") for r in log]
        known = f" (the log has #{min(ids)} to #{max(ids)})" if ids else " (the log is empty)"
        raise GoldenError(f"no decision #{decision} in the golden log{known}; `farm goldens log` lists them")
    return rec


def undo_target(root: str | Path, decision: int | None = None) -> dict | None:
    """The decision `undo` would reverse: #`decision`, else the last one in effect (None: nothing)."""
    log = GoldenIndex.load(root).log()
    state = decision_states(log)
    if decision is None:
        return next((r for r in reversed(log) if r.get("action") in DECISIONS and not state.get(r.get("id"))), None)
    rec = _find(log, decision)
    if rec.get("action") not in DECISIONS:
        what = f"an {rec.get('action')} of #{rec.get('undoes') or rec.get('redoes')}"
        raise GoldenError(f"decision #{decision} is {what}, not an approve, reject or prune: undo or redo"
                          f" #{rec.get('undoes') or rec.get('redoes')} itself")
    if state.get(decision):
        raise GoldenError(f"decision #{decision} is already undone (by #{state[decision]}); put it back with"
                          f" farm approve --redo {decision}")
    return rec


def redo_target(root: str | Path, decision: int) -> dict:
    """The undone decision `redo` would put back in effect (#`decision`, or the decision an undo
    record #`decision` reversed)."""
    log = GoldenIndex.load(root).log()
    rec = _find(log, decision)
    if rec.get("action") == "undo":
        rec = _find(log, rec["undoes"])
    if rec.get("action") not in DECISIONS:
        raise GoldenError(f"decision #{decision} is a {rec.get('action')}: nothing to redo")
    if not decision_states(log).get(rec["id"]):
        raise GoldenError(f"decision #{rec['id']} is in effect (not undone): nothing to redo")
    return rec


def _revert(root, target: dict, action: str, by: str, *, forward: bool, dry_run: bool) -> tuple[dict | None,
                                                                                                list[str]]:
    """Move every line `target` changed back to its `before` (undo) or again to its `after` (redo),
    when it is still as that decision (or its undo) left it; other lines are named in the notes."""
    notes: list[str] = []
    with locked(root) as index:
        undone_by = decision_states(index.log()).get(target["id"])
        if bool(undone_by) != forward:  # someone else undid (or redid) it meanwhile
            raise GoldenError(f"decision #{target['id']} is {'in effect' if forward else 'already undone'} now;"
                              f" `farm goldens log` shows the log")
        changes = []
        for ch in target.get("changes", []):
            trace, scope = ch["trace"], ch["env"]
            current = index.entry(trace, scope)
            frm, to = (ch.get("before"), ch.get("after")) if forward else (ch.get("after"), ch.get("before"))
            expected = canonical_entry(frm) if frm else None
            if current != expected:
                notes.append(f"{trace} [{scope}]: changed again since {target['action']} #{target['id']};"
                             f" left as it is")
                continue
            wanted = canonical_entry(to) if to else None
            if not dry_run:
                index.set_entry(trace, scope, wanted)
            for a in (wanted or {}).get("approved", []):
                if not index.image_path(a["png"]).is_file():
                    notes.append(f"{trace}: its golden image {a['png']}.png is gone from {index.images_dir}"
                                 f" (pruned?); restore it from version control")
            changes.append({"trace": trace, "env": scope, "before": current, "after": wanted})
        link = {"redoes": target["id"]} if forward else {"undoes": target["id"], "undoes_action": target["action"]}
        rec = {**_record_base(action, by), **link, "changes": changes}
        if dry_run:
            rec["id"] = None
            return rec, notes
        rec = index.append_log(rec)
    return rec, notes


def undo(root: str | Path, *, by: str, decision: int | None = None, dry_run: bool = False) -> tuple[dict | None,
                                                                                                   list[str]]:
    """Reverse decision #`decision` (an approve, reject or prune), else the last one still in effect
    (again: the one before it).

    A line changed again since (by a later decision that was not undone) is left alone and named
    in the returned sentences. Returns the new log record ("undo") or None when there is nothing to
    undo. `dry_run`: what it would do, nothing written (the record has id None).
    """
    target = undo_target(root, decision)
    if target is None:
        return None, ["nothing to undo"]
    return _revert(root, target, "undo", by, forward=False, dry_run=dry_run)


def redo(root: str | Path, decision: int, *, by: str, dry_run: bool = False) -> tuple[dict | None, list[str]]:
    """Put undone decision #`decision` back in effect (its lines as it left them); a "redo" record."""
    target = redo_target(root, decision)
    return _revert(root, target, "redo", by, forward=True, dry_run=dry_run)


@dataclass
class StaleReport:
    entries: list[tuple[str, str]]  # (trace, env) lines whose trace the manifest no longer renders
    images: list[Path]  # image files no line approves
    missing: list[str]  # `png` names of approved images whose file is missing

    @property
    def anything(self) -> bool:
        return bool(self.entries or self.images)


def _in_use(index: GoldenIndex, trace_keys: Iterable[str], legacy: Mapping[str, str | None] | None):
    return index.in_use({**dict.fromkeys(trace_keys), **(legacy or {})})


def stale(root: str | Path, trace_keys: Iterable[str], legacy: Mapping[str, str | None] | None = None) -> StaleReport:
    """Lines no trace of `trace_keys` (a manifest's traces) uses, unreferenced images, missing images.
    `legacy` (trace -> farm.plan.keys.legacy_key): a legacy line still answers for a trace that has no
    line of its own in that scope (GoldenIndex.in_use), so it is not stale until then."""
    index = GoldenIndex.load(root)
    used = _in_use(index, trace_keys, legacy)
    entries = sorted((k for k in index.entries if k not in used), key=entry_order)
    return StaleReport(entries, index.unreferenced_images(), index.missing_images())


def prune(root: str | Path, trace_keys: Iterable[str], *, by: str,
          legacy: Mapping[str, str | None] | None = None) -> tuple[dict | None, list[Path]]:
    """Remove the stale lines (`stale`; logged, so --undo restores them) and then the images no line
    approves (not undoable: version control has them). Returns the log record and removed files."""
    keys = list(trace_keys)
    rec = None
    with locked(root) as index:
        changes = []
        used = _in_use(index, keys, legacy)
        for k in sorted((k for k in index.entries if k not in used), key=entry_order):
            changes.append({"trace": k[0], "env": k[1], "before": index.entries[k], "after": None})
            index.set_entry(k[0], k[1], None)
        if changes:
            rec = index.append_log({**_record_base("prune", by), "changes": changes})
    with locked(root) as index:  # once the index no longer names them (a crash before leaves them all)
        removed = []
        used = index.referenced_images()
        for p in sorted(index.images_dir.glob("*.png")):
            if p.stem not in used:
                p.unlink()
                removed.append(p)
    return rec, removed
