"""A run compared with its goldens (`compare_run`), or with another run (`diff_runs`).

Both give a *results* dict (JSON-ready; the reports in farm.report read only this), written next
to the run: ``jobs/<id>/comparison.json`` for goldens, ``jobs/<id>/diff-<base id>.json`` for a diff.

Per trace, against goldens (farm.goldens explains digests and environments; a trace's goldens are
its key's lines or, in a scope without one, those of its legacy ms key: a percent trace approved
before keys named fractions, farm.goldens.index **Legacy keys**):

1. The trace did not render (or its image is missing): status ``error``.
2. Its pixel digest is approved for its environment or generically: ``pass`` (match ``exact``).
3. Its pixel digest was rejected: ``rejected``, with who rejected it, when and why.
4. No approved golden at all: ``new``. Never a pass: someone has to look at it first.
5. Otherwise `farm.compare.compare` with the trace's thresholds (the manifest's, per model and
   per trace; the comparison's defaults fill the rest) against each approved image of the scope
   the lookup chose (the environment's own goldens, else the generic ones), newest first: the
   first that passes makes it ``pass`` (match ``similar``), else ``fail`` with the closest
   golden's reason. A mismatch names the environment of both images when they differ.

Every metric of the deciding comparison is kept (`Comparison.to_dict()`), with the thresholds
used, the golden's digest, scope, approver and environment. For a frame that is not identical to
its golden, the difference heatmap and the SSIM map are written as PNGs under
``jobs/<id>/heatmaps/`` for the report.

The verdict: ``fail`` when any trace is ``fail``, ``rejected`` or ``error``; when any is ``new``
(unless `allow_new`: CI should not accept images nobody has looked at, so new traces fail by
default, as vitest's ``update: none`` and `--mpl` do); and when nothing was compared at all (no
trace had a golden), so a comparison can never pass by silently skipping; the one exception is a
run whose every trace is new with `allow_new` (a first run that asked for it): it passes, with a
note (``results["notes"]``) saying nothing was compared.

`diff_runs(base, head)` compares the same trace keys of two runs (for a pull request: before and
after a change), with the head's thresholds: ``unchanged`` (identical, or within the thresholds:
match ``similar``), ``changed``, ``added`` (only in head), ``removed`` (only in base), ``error``
(did not render in one of them).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from farm.compare.heatmaps import diff_heatmap, ssim_heatmap
from farm.compare.metrics import Comparison, compare, recorded_thresholds
from farm.compare.status import statuses
from farm.compare.table import ResultTable
from farm.files import json_wide_encoded, read_wide_json
from farm.goldens.index import GENERIC, GoldenIndex, env_key, now
from farm.images import blank_reason, image_digest, png_bytes, read_png, read_png_header
from farm.plan.causes import CAUSE_HINTS
from farm.plan.keys import legacy_key, parse_key
from farm.plan.thresholds import Thresholds

__all__ = [
    "FORMAT",
    "compare_run",
    "diff_runs",
    "golden_note",
    "load_results",
    "results_for",
    "verdict",
]

FORMAT = "modelfarm.comparison/1"
COMPARISON = "comparison.json"  # the job artefact compare_run writes
_now = now


def _job_digest(job) -> str:
    """What the run's traces are now (status and image per trace): results are reused only for it."""
    state = {k: [t.get("status"), t.get("digest")] for k, t in sorted(job.traces.items())}
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def _trace_base(key: str, t: Mapping) -> dict:
    return {"key": key, "model": t.get("model") or _model_of(key), "sequence": t.get("sequence"),
            "time_ms": t.get("time_ms"), "status": None, "match": None, "reason": None, "png": t.get("digest"),
            "digest": None, "size": None, "env": None, "golden": None, "metrics": None,
            "thresholds": recorded_thresholds(Thresholds.read(t.get("thresholds"))), "diff_image": None,
            "ssim_image": None,
            "render_s": None, "compare_s": None, "blank": None, "missing": list(t.get("missing") or [])}


def _timed(fn, *args) -> dict:
    """A trace's result with the seconds its comparison took ("compare_s": JUnit's time when the
    render time is not recorded)."""
    t0 = time.perf_counter()
    res = fn(*args)
    res["compare_s"] = round(max(time.perf_counter() - t0, 1e-6), 6)
    return res


def _model_of(key: str) -> str:
    try:
        return parse_key(key).model
    except ValueError:
        return key


class _Frame:
    """A stored frame: its PNG bytes' name, pixels, pixel digest and GL environment.

    A `lazy` frame reads only the chunks before the pixels (size and trace) when its trace names its
    GL environment: a comparison whose lookup finds these very PNG bytes approved (`same_as`) knows
    the pixel digest and blank mark from the golden's record and decodes nothing; else `decoded`."""

    def __init__(self, store, png: str, lazy: bool = False):
        data = store.read_image(png)
        self.png = png
        self.ref = store.image_ref(png)
        self.rgba = self.digest = self.blank = self._data = None
        header = read_png_header(data) if lazy else None
        if header is not None and (header[1] or {}).get("gl"):
            self._data, self.size, trace = data, list(header[0]), header[1]
        else:
            trace = self._decode(data)
        sidecar = {}
        if not (trace or {}).get("gl"):  # a PNG without its GL environment: an older store's sidecar object
            try:
                sidecar = store.read_sidecar(png) or {}
            except (OSError, ValueError):
                pass
        gl = (trace or {}).get("gl") or sidecar.get("trace", {}).get("gl")
        self.gl = gl or {}
        # Seconds the renderer took for this frame, when the worker recorded it (sidecar "render_s").
        seconds = sidecar.get("render_s", (trace or {}).get("render_s"))
        self.render_s = float(seconds) if isinstance(seconds, (int, float)) and seconds >= 0 else None
        self.env = sys.intern(env_key(self.gl))  # one string per environment, not per trace

    @classmethod
    def approved(cls, store, png: str, record: Mapping) -> _Frame:
        """A frame whose PNG bytes are the approved image `record`'s own (the same sha256), known without
        reading them: the golden's file is these bytes, so its size, GL environment, pixel digest and
        blank mark are the record's (farm.goldens.index). Read nothing: no GET per frame on S3."""
        self = cls.__new__(cls)
        self.png, self.ref, self.rgba, self._data = png, store.image_ref(png), None, None
        self.size, self.gl, self.render_s = list(record["size"]), record["gl"], None
        self.env = sys.intern(env_key(self.gl))
        self.same_as(record)
        return self

    def _decode(self, data: bytes) -> dict | None:
        self.rgba, trace = read_png(data)
        self.digest = image_digest(self.rgba)
        self.blank = blank_reason(self.rgba)
        self.size = [int(self.rgba.shape[1]), int(self.rgba.shape[0])]
        self._data = None
        return trace

    def same_as(self, record: Mapping) -> None:
        """These PNG bytes are the approved image `record`'s: the same pixels, so its digest and blank mark
        (an approval records the mark of blank pixels: farm.goldens.decisions.golden_marks)."""
        self.digest, self.blank, self._data = record["digest"], record.get("blank") or None, None

    def decoded(self) -> _Frame:
        """The frame with its pixels (a lazy frame decodes its bytes now)."""
        if self.rgba is None and self._data is not None:
            self._decode(self._data)
        return self


def _approved_png(look, png: str) -> dict | None:
    """An approved image of the lookup's lines with exactly these PNG bytes (`png`: their sha256)."""
    return next((a for scope in ("env", "generic") for a in look.approved_in(scope) if a.get("png") == png), None)


def _golden_bytes(store, index: GoldenIndex, envs: Iterable[str], key: str, t: Mapping, legacy: str | None):
    """(frame, lookup) for a rendered trace whose PNG bytes are an approved golden's of its key, without
    reading the image (`_Frame.approved`): the record names the GL environment, the lookup of that
    environment finds the record as a lazy frame's would (`_approved_png`). None when no approved image
    has these bytes, or the trace lacks what only its image would tell (its render time)."""
    png = t.get("digest")
    if t.get("status") != "done" or not png or "render_s" not in t:
        return None
    for env in envs:
        for a in (index.line(key, env, legacy) or {}).get("approved", ()):
            if a.get("png") == png and a.get("gl") and a.get("size") and env in (GENERIC, env_key(a["gl"])):
                look = index.lookup(key, sys.intern(env_key(a["gl"])), legacy)
                record = _approved_png(look, png)
                return (_Frame.approved(store, png, record), look) if record is not None else None
    return None


def _unreadable(t: Mapping, e: Exception) -> str:
    if isinstance(e, OSError):
        return f"The frame's image {t['digest'][:12]}... is missing from the store ({e.strerror or e})."
    return f"The frame's image {t['digest'][:12]}... cannot be read: {type(e).__name__}: {e}"


def _load_frame(store, t: Mapping, lazy: bool = False) -> tuple[_Frame | None, str | None]:
    if t.get("status") != "done" or not t.get("digest"):
        if t.get("status") == "pending":
            return None, "The frame was not rendered (the run did not finish it)."
        return None, f"The frame did not render: {t.get('error') or t.get('status')}"
    try:
        return _Frame(store, t["digest"], lazy), None
    except Exception as e:  # noqa: BLE001 - a corrupt file is this trace's error, not the run's
        return None, _unreadable(t, e)


def _known_frame(frame: _Frame, look, t: Mapping) -> tuple[_Frame | None, str | None]:
    """A lazy frame's pixel digest: from an approved golden with the same bytes, else decoded."""
    if frame.rgba is not None:
        return frame, None
    record = _approved_png(look, frame.png)
    if record is not None:
        frame.same_as(record)
        return frame, None
    try:
        return frame.decoded(), None
    except Exception as e:  # noqa: BLE001 - as _load_frame
        return None, _unreadable(t, e)


def _write_heatmaps(job, res: dict, new: np.ndarray, old: np.ndarray, cmp: Comparison) -> None:
    """Difference heatmap and SSIM map as job artefacts heatmaps/*.png (references relative to the store)."""
    if new.shape != old.shape:
        return
    stem = f"heatmaps/{(cmp.digest or '')[:16]}-{(cmp.golden_digest or '')[:16]}"
    res["diff_image"] = job.store.put_artefact(job.id, f"{stem}-diff.png", png_bytes(diff_heatmap(new, old)))
    if cmp.ssim_map is not None:
        res["ssim_image"] = job.store.put_artefact(job.id, f"{stem}-ssim.png", png_bytes(ssim_heatmap(cmp.ssim_map)))


def _golden_info(golden: Mapping, scope: str, scope_env: str, index: GoldenIndex) -> dict:
    return {"digest": golden["digest"], "png": golden.get("png"), "scope": scope, "scope_env": scope_env,
            "by": golden.get("by"), "at": golden.get("at"), "run": golden.get("run"),
            "env": sys.intern(env_key(golden.get("gl"))), "path": str(index.image_path(golden["png"])),
            "missing": list(golden.get("missing") or []), "blank": golden.get("blank") or None}


def golden_note(golden: Mapping | None) -> str | None:
    """The sentence every report shows for a trace whose golden was approved drawn with
    placeholders for missing assets or blank (farm.goldens.decisions.golden_marks); else None."""
    if not golden:
        return None
    parts = []
    if golden.get("missing"):
        parts.append(f"golden drawn with placeholders: {', '.join(golden['missing'])} missing")
    if golden.get("blank"):
        parts.append(f"golden is a blank frame ({golden['blank']})")
    return "; ".join(parts) or None


def _mark_golden(res: dict) -> None:
    """Carry the golden's marks as the trace's `golden_note`; a frame that now differs from a golden
    drawn with placeholders says which of those assets it found."""
    res["golden_note"] = golden_note(res.get("golden"))
    if res["golden_note"] and res["status"] == "fail" and res["golden"].get("missing"):
        found = [a for a in res["golden"]["missing"] if a not in res["missing"]]
        if found:
            res["reason"] += (f" Its golden was drawn with placeholders for {', '.join(found)}, which this frame"
                              f" found: approve this frame once it looks right.")


def _compare_trace(job, index: GoldenIndex, key: str, t: Mapping, heatmaps: bool, envs: Iterable[str] = ()) -> dict:
    res = _match_trace(job, index, key, t, heatmaps, envs)
    _mark_golden(res)
    return res


def _match_trace(job, index: GoldenIndex, key: str, t: Mapping, heatmaps: bool, envs: Iterable[str]) -> dict:
    """`envs`: the index's scopes (`GoldenIndex.envs`, once per comparison), where an approved image with
    this trace's very PNG bytes is looked for before its image is read (`_golden_bytes`)."""
    res = _trace_base(key, t)
    legacy = legacy_key(key, t.get("time_ms"))  # goldens approved under ms keys
    known = _golden_bytes(job.store, index, envs, key, t, legacy)
    if known is not None:
        (frame, look), error = known, None
    else:
        frame, error = _load_frame(job.store, t, lazy=True)
        look = None
        if frame is not None:
            look = index.lookup(key, frame.env, legacy)
            frame, error = _known_frame(frame, look, t)
    if frame is None:
        res.update(status="error", reason=error)
        if t.get("cause"):  # failed as planned (farm.compare.status): the verdict names it once per model
            res.update(cause=t["cause"], error=t.get("error"))
        return res
    res.update(digest=frame.digest, size=frame.size, env=frame.env, render_s=t.get("render_s", frame.render_s),
               blank=frame.blank)
    hit = look.exact(frame.digest)
    if hit is not None:
        return _exact_result(res, index, frame, hit)
    candidates = look.candidates()
    if not candidates:
        res.update(status="new", reason="No approved golden for this trace yet (in this environment or"
                                        " generically).")
        return res
    return _similar_result(job, res, index, frame.decoded(), look, heatmaps)


def _exact_result(res: dict, index: GoldenIndex, frame: _Frame, hit: tuple[str, str, dict]) -> dict:
    """A frame whose pixel digest the index names: approved (a pass, match exact) or rejected."""
    kind, scope, record = hit
    scope_env = frame.env if scope == "env" else "*"
    if kind == "approved":
        same = Comparison("identical", Thresholds.read(res["thresholds"]), ssim=1.0, ssim_rgb=1.0,
                          ssim_alpha=1.0, pixels_over=0.0, max_diff=0, digest=frame.digest,
                          golden_digest=frame.digest, size=tuple(frame.size), golden_size=tuple(frame.size))
        res.update(status="pass", match="exact", golden=_golden_info(record, scope, scope_env, index),
                   metrics=same.to_dict())
    else:
        res.update(status="rejected", golden=None,
                   rejected={"scope": scope, "by": record.get("by"), "at": record.get("at"),
                             "run": record.get("run"), "reason": record.get("reason")},
                   reason=f"This image ({frame.digest[:12]}...) was rejected by {record.get('by')} on"
                          f" {record.get('at')} (run {record.get('run')}): {record.get('reason')}.")
    return res


def _similar_result(job, res: dict, index: GoldenIndex, frame: _Frame, look, heatmaps: bool) -> dict:
    """A frame the index does not name, against the approved images of its scope, newest first: the first
    that passes (match similar), else a fail with the closest one's reason."""
    th = Thresholds.read(res["thresholds"])
    candidates = look.candidates()
    scope_env = frame.env if look.scope == "env" else "*"
    best: tuple[Comparison, dict, np.ndarray] | None = None
    for golden in candidates:
        path = index.image_path(golden["png"])
        try:
            old, _ = read_png(path.read_bytes())
        except OSError:
            continue
        cmp = compare(frame.rgba, old, th)
        rank = (cmp.passed, cmp.ssim if cmp.ssim is not None else -2.0, -cmp.pixels_over)
        if best is None or rank > (best[0].passed, best[0].ssim if best[0].ssim is not None else -2.0,
                                   -best[0].pixels_over):
            best = (cmp, golden, old)
        if cmp.passed:
            break
    if best is None:
        res.update(status="error", reason=f"The golden image(s) of this trace are missing from {index.images_dir}"
                                          f" ({', '.join(g['digest'][:12] + '...' for g in candidates)}).")
        return res
    cmp, golden, old = best
    if heatmaps:
        cmp = compare(frame.rgba, old, th, with_map=True)
        _write_heatmaps(job, res, frame.rgba, old, cmp)
    info = _golden_info(golden, look.scope, scope_env, index)
    res.update(golden=info, metrics=cmp.to_dict())
    if cmp.passed:
        res.update(status="pass", match="similar")
    else:
        reason = cmp.reason or "The frame differs from its golden."
        if info["env"] != frame.env:
            reason += f" The golden was rendered by {info['env']}; this frame by {frame.env}."
        res.update(status="fail", reason=reason)
    return res


def verdict(results: dict, allow_new: bool | None = None) -> dict:
    """Fill in counts, the verdict and the sentences behind it (in place; returned)."""
    if allow_new is not None:
        results["allow_new"] = bool(allow_new)
    allow = results.get("allow_new", False)
    traces = results["traces"].values()
    counts = {s: 0 for s in statuses(results.get("kind"))}
    for t in traces:
        counts[t["status"]] = counts.get(t["status"], 0) + 1
    counts["total"] = len(results["traces"])
    problems: list[str] = []
    notes: list[str] = []
    if results.get("kind") == "diff":
        compared = sum(1 for t in traces if t["status"] in ("unchanged", "changed"))
        n = counts["changed"] + counts["added"] + counts["removed"] + counts["error"]
        results["verdict"] = "changed" if n else "same"
        if counts["changed"]:
            problems.append(f"{counts['changed']} trace(s) changed")
        if counts["added"] or counts["removed"]:
            problems.append(f"{counts['added']} added, {counts['removed']} removed")
        if counts["error"]:
            problems.append(f"{counts['error']} trace(s) did not render in one of the runs")
    else:
        compared = counts["pass"] + counts["fail"] + counts["rejected"]
        failing = counts["fail"] + counts["rejected"] + counts["error"]
        if counts["fail"]:
            problems.append(f"{counts['fail']} trace(s) differ from their goldens")
        if counts["rejected"]:
            problems.append(f"{counts['rejected']} trace(s) rendered an image that was rejected before")
        if counts["error"]:
            problems.append(f"{counts['error']} trace(s) did not render")
        if counts["new"] and not allow:
            problems.append(f"{counts['new']} trace(s) have no golden yet: review them, then approve them with"
                            f" the command given (or pass --allow-new to let new traces through)")
        # Nothing compared fails (a comparison never passes by silently skipping), except when every
        # trace is new and new traces were explicitly allowed (a first run with --allow-new).
        all_new_allowed = compared == 0 and counts["new"] and allow and not failing
        if compared == 0 and not all_new_allowed:
            problems.append("nothing was compared: no trace of this run has an approved golden")
        if all_new_allowed:
            notes.append(f"nothing was compared: all {counts['new']} trace(s) are new (allowed by --allow-new);"
                         f" approve them to start comparing")
        results["verdict"] = ("fail" if failing or (counts["new"] and not allow) or (compared == 0 and not
                              all_new_allowed) else "pass")
    for cause, error in dict.fromkeys((t["cause"], t.get("error")) for t in traces if t.get("cause") in CAUSE_HINTS):
        problems.append(f"{error}; {CAUSE_HINTS[cause]}")
    marked = marked_note(results)
    if marked:
        notes.append(marked)
    results["counts"] = counts
    results["compared"] = compared
    results["problems"] = problems
    results["notes"] = notes
    return results


def marked_note(results: Mapping) -> str | None:
    """One sentence for the traces compared with a golden drawn with placeholders or blank: counts by
    reason, a few models, where the full list is (None when there are none)."""
    marked = [t for t in results["traces"].values() if golden_note(t.get("golden"))]
    if not marked:
        return None
    missing = sum(1 for t in marked if t["golden"].get("missing"))
    blank = sum(1 for t in marked if t["golden"].get("blank"))
    why = ", ".join(x for x in (f"{missing} drawn with placeholders for missing assets" if missing else "",
                                f"{blank} blank" if blank else "") if x)
    models = list(dict.fromkeys(t.get("model") or t["key"] for t in marked))
    shown = ", ".join(models[:3]) + (f" and {len(models) - 3} more model(s)" if len(models) > 3 else "")
    return (f"{len(marked)} trace(s) compared with goldens approved as drawn with placeholders or blank ({why};"
            f" e.g. {shown}): such a golden is what was drawn then, not the model as meant; `farm goldens --json`"
            f" lists them")


def compare_run(job, goldens: str | Path, *, allow_new: bool = False, keys: Iterable[str] | None = None,
                previous: dict | None = None, heatmaps: bool = True,
                write: bool = True) -> dict:
    """Compare a run (farm.run.jobs.JobState) with the golden folder `goldens`; returns the results.

    `keys` with `previous` recompares only those traces and keeps the rest: the caller knows the
    other traces' golden lines did not change (`farm serve`, farm.serve.index_watch, compares
    again exactly the traces whose lines changed). The results are written to
    jobs/<id>/comparison.json unless `write` is False.
    """
    index = GoldenIndex.load(goldens)
    envs = sorted(index.envs())
    if keys is not None and previous is not None:
        traces = dict(previous["traces"])
        for k in keys:
            if k in job.traces:
                traces[k] = _timed(_compare_trace, job, index, k, job.traces[k], heatmaps, envs)
        traces = ResultTable(sorted(traces.items()))
    else:
        traces = ResultTable()
        for k, t in sorted(job.traces.items()):
            traces[k] = _timed(_compare_trace, job, index, k, t, heatmaps, envs)
    results = {
        "format": FORMAT, "kind": "goldens", "job": job.id, "name": job.data.get("name"),
        "store": job.store.location, "manifest": job.data.get("manifest"), "goldens": str(Path(goldens).absolute()),
        "goldens_digest": index.digest(), "job_digest": _job_digest(job), "created": _now(),
        "traces": traces,
    }
    verdict(results, allow_new)
    if write:
        job.store.put_artefact(job.id, COMPARISON, json_wide_encoded(results, "traces"))
    return results


def load_results(job, name: str = COMPARISON) -> dict | None:
    """A stored comparison (None when absent, not JSON or of another format), its traces read a block of
    lines at a time into a `ResultTable` (a 100k-trace document, about 170 MB, is never all dicts); an
    older, indented document is read whole."""
    file = job.store.open_artefact(job.id, name)
    if file is None:
        return None
    table = ResultTable()
    with file:
        try:
            data = read_wide_json(file.read, {"traces": table.update})
            if "traces" in data:
                data["traces"] = table
        except ValueError:
            file.seek(0)
            try:
                data = json.loads(file.read().decode("utf-8"))
            except ValueError:
                return None
    if not isinstance(data, dict):
        return None
    return data if data.get("format") == FORMAT else None


def results_for(job, goldens: str | Path, *, allow_new: bool = False, fresh: bool = False) -> dict:
    """The run's comparison with `goldens`: the stored comparison.json when it was made against
    the same index and the same images of the run, else a new comparison (written)."""
    if not fresh:
        old = load_results(job)
        if (old and old.get("goldens") == str(Path(goldens).absolute())
                and old.get("goldens_digest") == GoldenIndex.load(goldens).digest()
                and old.get("job_digest") == _job_digest(job)):
            return verdict(old, allow_new)
    return compare_run(job, goldens, allow_new=allow_new)


# --------------------------------------------------------------------------------------------
# Two runs


def _diff_trace(base, head, key: str, tb: Mapping | None, th_: Mapping | None, heatmaps: bool) -> dict:
    t = th_ if th_ is not None else tb
    res = _trace_base(key, t)
    res["png"] = (th_ or {}).get("digest")
    if th_ is None:
        frame, error = _load_frame(base.store, tb)
        res.update(status="removed", reason="The trace is in the base run only.", png=None)
        if frame is not None:
            res["golden"] = {"digest": frame.digest, "png": frame.png, "scope": "base", "env": frame.env,
                             "ref": frame.ref, "run": base.id}
        return res
    new, error_h = _load_frame(head.store, th_)
    if new is not None:
        res.update(digest=new.digest, size=new.size, env=new.env, render_s=th_.get("render_s", new.render_s),
                   blank=new.blank)
    if tb is None:
        res.update(status="added" if new is not None else "error",
                   reason="The trace is in the head run only." if new is not None else error_h)
        return res
    old, error_b = _load_frame(base.store, tb)
    if old is not None:
        res["golden"] = {"digest": old.digest, "png": old.png, "scope": "base", "env": old.env,
                         "ref": old.ref, "run": base.id}
    if new is None or old is None:
        res.update(status="error", reason=f"head: {error_h}" if new is None else f"base: {error_b}")
        return res
    th = Thresholds.from_dict(res["thresholds"])
    cmp = compare(new.rgba, old.rgba, th, with_map=heatmaps)
    if heatmaps and cmp.status != "identical":
        _write_heatmaps(head, res, new.rgba, old.rgba, cmp)
    res["inputs_changed"] = inputs_changed(_inputs(base, key, tb, old.png), _inputs(head, key, th_, new.png))
    res["metrics"] = cmp.to_dict()
    if cmp.passed:
        res.update(status="unchanged", match="exact" if cmp.status == "identical" else "similar")
    else:
        reason = cmp.reason or "The frame changed."
        if old.env != new.env:
            reason += f" The base frame was rendered by {old.env}; the head frame by {new.env}."
        res.update(status="changed", reason=reason)
    return res


Inputs = Mapping[tuple[str, str], "str | None"]  # (kind, name) -> sha256 of the bytes; None: missing


def _inputs(job, key: str, t: Mapping, png: str) -> Inputs:
    """What a stored frame of `job` was drawn from (its sidecar: Store.frame_sidecar). Kind
    ``model`` is the model file itself (its trace's content hash), ``input`` every asset the search
    looked up for it (textures, tables, tags, child models), by the name the model asked for."""
    sidecar = job.store.frame_sidecar(job.id, t.get("batch"), key, png)
    if sidecar is None:
        return {}
    out: dict[tuple[str, str], str | None] = {}
    trace = sidecar.get("trace") or {}
    if trace.get("model") and trace.get("model_hash"):
        out["model", str(trace["model"])] = str(trace["model_hash"])
    for a in sidecar.get("assets") or []:
        out["input", str(a.get("asked"))] = None if a.get("missing") else a.get("sha256")
    return out


def inputs_changed(base: Inputs, head: Inputs) -> list[dict]:
    """The inputs (the model file, then assets) whose bytes differ between two frames (or that one of them
    lacked), sorted: ``{"kind": "model"|"input", "asset": name, "base": sha256|None|"absent", "head": ...}``."""
    out = []
    for kind, name in sorted(set(base) | set(head), key=lambda k: (k[0] != "model", k[1])):
        b, h = base.get((kind, name), "absent"), head.get((kind, name), "absent")
        if b != h:
            out.append({"kind": kind, "asset": name, "base": b, "head": h})
    return out


def diff_runs(base, head, *, heatmaps: bool = True, write: bool = True) -> dict:
    """Compare run `head` with run `base`, trace by trace (see the module docstring)."""
    keys = sorted(set(base.traces) | set(head.traces))
    traces = {k: _timed(_diff_trace, base, head, k, base.traces.get(k), head.traces.get(k), heatmaps) for k in keys}
    results = {
        "format": FORMAT, "kind": "diff", "job": head.id, "name": head.data.get("name"),
        "store": head.store.location, "manifest": head.data.get("manifest"),
        "base": {"job": base.id, "store": base.store.location, "manifest": base.data.get("manifest")},
        "head": {"job": head.id, "store": head.store.location, "manifest": head.data.get("manifest")},
        "created": _now(), "traces": traces,
    }
    verdict(results)
    if write:
        head.store.put_artefact(head.id, f"diff-{base.id}.json", json_wide_encoded(results, "traces"))
    return results
