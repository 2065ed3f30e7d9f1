"""After a run: compare it with its goldens, approve what ``--update-goldens`` asks and compare
again, write the report. `farm run` (farm.cli.jobs), the nightly run (farm.flows.nightly) and `farm demo`
(farm.flows.demo) all call `compare_job`, the one pipeline; it prints nothing (each caller says what it
says, from the `Compared` it returns, and `on_update` hears of an approval as it happens).

``--update-goldens=MODE`` (`UPDATE_MODES`) approves the traces a comparison found new (``new``),
failed (``failed``) or all of them (``all``), as the images this run stored. Real assets miss some
textures and some frames draw nothing, so a frame that drew placeholders for missing assets or came
out blank (its `marks`) is approved only when its flag allows it (``allow_missing``,
``allow_blank``), and then stays marked in the goldens (farm.goldens.decisions.golden_marks); else
it is held back. Every marked trace, approved or held, is listed in the job artefact `LISTING`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from farm import goldens as G
from farm.compare.runs import compare_run
from farm.files import json_bytes
from farm.report import write_report

__all__ = ["LISTING", "MARKS", "UPDATE_MODES", "CompareOptions", "Compared", "GoldensUpdate", "all_new",
           "compare_job", "marks", "update_goldens", "wanted"]

UPDATE_MODES = {"new": {"new"}, "failed": {"fail"}, "all": None}  # --update-goldens=MODE -> statuses approved
MARKS = ("missing", "blank")  # what a frame shows that is not the model as meant (a compared trace's fields)
LISTING = "goldens-update.json"  # the job artefact with every marked trace of an --update-goldens


def marks(t: Mapping) -> list[str]:
    """What a compared trace's frame shows that is not the model as meant: "missing", "blank"."""
    return [m for m in MARKS if t.get(m)]


def wanted(results: Mapping, mode: str) -> list[str]:
    """The traces --update-goldens=MODE approves in a comparison's results."""
    statuses = UPDATE_MODES[mode]
    return [k for k, t in results["traces"].items()
            if (statuses is None and t["status"] != "error") or (statuses is not None and t["status"] in statuses)]


@dataclass
class GoldensUpdate:
    """What an --update-goldens did: the traces it meant to approve, the decision record (None when
    nothing was approved), the sentences for traces skipped for other reasons, the marked traces
    approved and held back (key -> marks), and where the full list is (`LISTING`)."""

    mode: str
    folder: Path
    allowed: dict[str, bool]
    keys: list[str]
    record: dict | None = None
    skipped: list[str] = field(default_factory=list)
    approved: dict[str, list[str]] = field(default_factory=dict)
    held: dict[str, list[str]] = field(default_factory=dict)
    listing: str | None = None


def _listing(job, approved: Mapping[str, list[str]], held: Mapping[str, list[str]], results: Mapping) -> str:
    """Write the full list as the job artefact LISTING; where it is, as a user can open it."""
    def rows(keys: Mapping[str, list[str]]) -> list[dict]:
        return [{"trace": k, "missing": list(results["traces"][k].get("missing") or []),
                 "blank": results["traces"][k].get("blank")} for k in sorted(keys)]

    ref = job.store.put_artefact(job.id, LISTING, json_bytes({"job": job.id, "approved_marked": rows(approved),
                                                               "not_approved": rows(held)}))
    path = job.store.local_path(ref)
    return str(path) if path is not None else f"{ref} in {job.store.location}"


def update_goldens(job, folder: Path, mode: str, results: Mapping, allow_blank: bool = False,
                   allow_missing: bool = False) -> GoldensUpdate:
    """Approve what --update-goldens=MODE names in `results` (the images this run stored) into `folder`."""
    allowed = {"missing": allow_missing, "blank": allow_blank}
    done = GoldensUpdate(mode, Path(folder), allowed, wanted(results, mode))
    if not done.keys:
        return done
    done.held = {k: ms for k in done.keys if (ms := [m for m in marks(results["traces"][k]) if not allowed[m]])}
    done.record, done.skipped = G.approve(folder, job, [k for k in done.keys if k not in done.held],
                                          by=G.default_user(None), allow_blank=allow_blank,
                                          allow_missing=allow_missing)
    changed = {ch["trace"] for ch in (done.record or {}).get("changes", [])}
    done.approved = {k: ms for k in done.keys if k in changed and (ms := marks(results["traces"][k]))}
    if done.approved or done.held:
        done.listing = _listing(job, done.approved, done.held, results)
    return done


@dataclass
class Compared:
    """What `compare_job` did. `status`: 0 when the comparison passed, 1 when it failed, None when
    the run has no goldens and none were asked for (nothing compared; `first` then holds what each
    frame shows, compared with the folder --update-goldens would create, nothing written; None when
    that is not a folder). `before`: the comparison an --update-goldens approved from."""

    status: int | None
    folder: Path | None = None
    results: dict | None = None
    reports: dict[str, Path] | None = None
    update: GoldensUpdate | None = None
    before: dict | None = None
    first: dict | None = None

    @property
    def html(self) -> Path | None:
        """The report's index.html (None when no report was written)."""
        return self.reports["html"] if self.reports else None

    @property
    def all_new(self) -> bool:
        """A first run against a goldens folder (`all_new`)."""
        return all_new(self.results)


def all_new(results: Mapping | None) -> bool:
    """Whether a comparison is a first run against its goldens: every trace that rendered is new (and
    there are some); the traces that did not render (errors: a model that does not load) aside."""
    counts = (results or {}).get("counts") or {}
    return bool(counts.get("new")) and counts["new"] + counts.get("error", 0) == counts.get("total")


def first_run(job) -> dict | None:
    """What comparing a run with no goldens would say of each trace, as far as the bootstrap hint
    reads it (new or error, with its marks), from the job's traces and the sidecars its workers put
    in the batch results (Store.frame_sidecar: one read per batch, no image read); None when a frame's
    sidecar does not say whether it is blank (a store of an older version: compare to know)."""
    traces = {}
    for key, t in job.traces.items():
        base = {"model": t.get("model"), "missing": list(t.get("missing") or [])}
        if t.get("status") != "done" or not t.get("digest"):
            traces[key] = {**base, "status": "error"}
            continue
        sidecar = job.store.frame_sidecar(job.id, t.get("batch"), key, t["digest"])
        if sidecar is None or "blank" not in sidecar:
            return None
        traces[key] = {**base, "status": "new", "blank": sidecar["blank"]}
    return {"traces": traces}


@dataclass(frozen=True)
class CompareOptions:
    """What a caller asks of `compare_job`: the goldens folder (None: the one found for the job's
    manifest), new traces allowed to pass, an --update-goldens mode (`UPDATE_MODES`) and what it may
    approve as drawn, the report folder (None: no report) and its links (farm.report.write_report)."""

    goldens: str | Path | None = None
    allow_new: bool = False
    update: str | None = None
    allow_blank: bool = False
    allow_missing: bool = False
    report: str | Path | None = None
    image_base: str | None = None
    report_url: str | None = None


def compare_job(job, options: CompareOptions = CompareOptions(),
                on_update: Callable[[GoldensUpdate, dict], None] | None = None) -> Compared:
    """Compare a run (farm.run.jobs.JobState) with its goldens: `options.goldens`, else the folder
    found for its manifest (farm.goldens.find_goldens); with `options.update` approve those traces
    (creating <manifest folder>/goldens when there are none), tell `on_update`, and compare again;
    write the report folder `options.report` when given."""
    o = options
    goldens, update, allow_new = o.goldens, o.update, o.allow_new
    manifest = job.data.get("manifest")
    created = Path(manifest or ".").parent / "goldens"  # what --update-goldens creates
    folder = G.find_goldens(manifest, goldens)
    if folder is None and update:
        folder = created
    if folder is None:
        first = first_run(job)
        if first is None:  # an older store: its frames' marks are in their images
            try:
                first = compare_run(job, created, write=False)
            except OSError:  # `goldens` is not a folder
                first = None
        return Compared(None, first=first)
    results = compare_run(job, folder, allow_new=allow_new)
    done = before = None
    if update:
        before = results
        done = update_goldens(job, folder, update, results, o.allow_blank, o.allow_missing)
        if on_update is not None:
            on_update(done, results)
        if done.record is not None:
            results = compare_run(job, folder, allow_new=allow_new)
    paths = write_report(results, o.report, image_base=o.image_base, report_url=o.report_url) if o.report else None
    return Compared(0 if results["verdict"] == "pass" else 1, folder, results, paths, done, before)
