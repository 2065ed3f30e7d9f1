"""Job state and the three job commands: run, status, retry (the same for both runners).

A job's state is a document in the store (`Store.write_job`; the folder store's
``jobs/<job_id>.json``) written by the process that runs the job (`farm run`, `farm retry`): the
manifest it came from, each model's settings (so retries can plan a model again), the batches,
and per trace key its status (``pending``, ``done`` or ``failed``), image digest or error,
thresholds, batch and attempts. The whole document is written when batches are sent (a new job,
a re-planned model) and when a run ends; in between, each batch result recorded appends one
record to the job's log (`Store.append_job_log`) with the progress fields (`PROGRESS_FIELDS`) of
the traces it changed, so a progress tick costs what changed, not the whole document. Records
are numbered; the document says up to which one it holds (``log``), and `JobState.load` applies
the later ones. A kill at any point leaves the last document and whole log records: the old
state or the new one, never a mix. A document without ``log`` (modelfarm 0.2 wrote every
progress tick into the document) is read as it is. The index (``index.json`` in the folder store:
each rendered trace key -> its image digest) is written with the document.

The traces are a `farm.plan.traces.TraceTable` (columns, not a dict a trace), and the document is
written one trace and one batch a line, in pieces (`Store.write_job`), and read back a block of lines
at a time into a table (`Store.read_job(traces=)`): a million-frame job is never one string or a
million dicts in the coordinator, and `farm status` of it reads no more than the table.

Workers never write the job file; each writes its batch's result next to it
(``jobs/<job_id>/batches/<batch>.json``). `status` and `retry` merge those in, so a job whose
`farm run` was interrupted (Ctrl-C, a lost terminal) while Celery workers went on is still
reported and retried correctly.

The runner is chosen by the broker (farm.run.dispatch): ``--broker URL`` or ``FARM_BROKER_URL``
sends batches to Celery workers (farm.celery); with neither, a local process pool runs the same
batch code (farm.run.local).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
import secrets
import time
from collections import defaultdict
from pathlib import Path

from farm.environment import broker_url, default_out, redact_url
from farm.plan.batches import Batch, Plan, expand_manifest, expand_plan
from farm.plan.causes import CAUSE_HINTS, RETRY_CANNOT_FIX, UNLOADABLE
from farm.plan.manifest import ManifestError, ModelPlan, TraceThresholds, load_manifest
from farm.plan.traces import TraceTable
from farm.run.dispatch import in_flight, mode, run_batches
from farm.run.execute import BatchResult
from farm.run.inputs import Publisher, travels
from farm.run.progress import Progress
from farm.store import Store, open_store, split_job_url
from farm.store.documents import check_job_log_record

__all__ = ["JobError", "JobState", "retry_job", "run_job", "status_text"]

FORMAT = "modelfarm.job/1"
# What recording a result or sending a batch changes in a trace (a log record carries these).
PROGRESS_FIELDS = ("batch", "status", "digest", "error", "attempts", "missing", "render_s")


class JobError(RuntimeError):
    """A job that cannot be found or run; the message says what to do."""


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


class JobState:
    def __init__(self, store: Store, data: dict, stored: bool = False, batches: bool = True):
        self.store = store
        self.data = data
        if not isinstance(data["traces"], TraceTable):  # a document read: its traces into columns
            data["traces"] = TraceTable(data["traces"])
        self._stored = stored  # the store holds a document of this job (else the next save writes one)
        self._whole = False  # traces were replaced (a re-planned model): the next save writes the document
        self._seq = int(data.get("log") or 0)  # the last log record this state holds
        self._dirty: set[str] = set()  # traces changed since the last save
        self._dirty_batches: set[str] = set()
        self._dirty_runs = False
        self._batches = batches  # False: loaded without its batches (load's batches=False), never saved

    # --- creating and loading
    @classmethod
    def create(cls, store: Store, manifest, plan: Plan, job_id: str | None = None) -> JobState:
        if job_id is None:
            stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            job_id = f"{manifest.name}-{stamp}-{secrets.token_hex(2)}"
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,128}", job_id):
            raise JobError(f"job id {job_id!r}: use letters, digits, '.', '_' and '-'")
        if store.has_job(job_id):
            raise JobError(f"job {job_id!r} already exists in {store.location}; `farm retry {job_id} --failed`"
                           f" reruns its failed frames")
        # The plan's table (a plan of a few traces may be a dict), each trace made its planned state in place.
        traces = plan.traces if isinstance(plan.traces, TraceTable) else TraceTable(plan.traces)
        for trace in traces.values():
            _planned(trace, in_place=True)
        data = {
            "format": FORMAT, "job": job_id, "name": manifest.name, "manifest": str(manifest.path),
            "manifest_sha256": hashlib.sha256(manifest.text.encode("utf-8")).hexdigest()
            if getattr(manifest, "text", None) else None, "created": _now(), "runs": [], "models": plan.models,
            "trace_thresholds": [{"match": t.match, "values": t.values, "line": t.line}
                                 for t in manifest.trace_thresholds],
            "batches": {b.id: b.to_dict() for b in plan.batches}, "traces": traces,
        }
        return cls(store, data)

    @classmethod
    def load(cls, job: str, out: str | Path | None = None, *, batches: bool = True) -> JobState:
        """A job by id (in `out`, default FARM_OUT or ./farm-out) or by the path or URL of its jobs/<id>.json.
        `batches=False`: its traces and runs only, to show (a million-frame job's batches are a fifth of
        its document and of its memory); such a state cannot be saved."""
        p = Path(job)
        if split_job_url(job):
            location, job_id = split_job_url(job)
            store = open_store(location)
        elif p.suffix == ".json" and p.is_file():
            store = open_store(p.resolve().parent.parent)
            job_id = p.stem
        else:
            store = open_store(out or default_out())
            job_id = job
        try:
            data = store.read_job(job_id, traces=TraceTable(), batches=batches)  # a trace a line, into columns
        except FileNotFoundError:
            known = store.job_ids()
            hint = f"; jobs there ({len(known)}): {', '.join(known)}" if known else "; it has no jobs yet"
            raise JobError(f"no job {job_id!r} in {store.location} (pass --out DIR or the path of its"
                           f" jobs/<id>.json){hint}") from None
        except ValueError as e:
            raise JobError(f"job file {store.job_location(job_id)} is not valid JSON: {e}") from None
        if data.get("format") != FORMAT:
            raise JobError(f"{store.job_location(job_id)} is not a modelfarm job file (format"
                           f" {data.get('format')!r})")
        job = cls(store, data, stored=True, batches=batches)
        try:
            records = store.read_job_log(job_id, after=int(data.get("log") or 0))  # the rest the document holds
        except ValueError as e:
            raise JobError(f"the log of job {job_id!r} is damaged: {e}") from None
        for rec in records:
            job._apply(rec)
        return job

    def _apply(self, rec: dict) -> None:
        """Apply one log record (written by `save`) unless the document holds it already."""
        seq = rec.get("seq")
        problem = check_job_log_record(rec)
        if problem:
            raise JobError(f"the log of job {self.id!r} in {self.store.location}: record {seq!r}: {problem}")
        if seq <= int(self.data.get("log") or 0):
            return
        for key, fields in rec.get("traces", {}).items():
            t = self.traces.get(key)
            if t is None:
                continue
            for f in PROGRESS_FIELDS:
                if f in fields:
                    t[f] = fields[f]
                else:
                    t.pop(f, None)
        self.batches.update(rec.get("batches", {}))
        if "runs" in rec:
            self.data["runs"] = rec["runs"]
        self._seq = max(self._seq, seq)

    # --- properties
    @property
    def id(self) -> str:
        return self.data["job"]

    @property
    def traces(self) -> TraceTable:
        return self.data["traces"]

    @property
    def batches(self) -> dict[str, dict]:
        return self.data["batches"]

    def counts(self) -> dict[str, int]:
        c = {"total": len(self.traces), "done": 0, "failed": 0, "pending": 0}
        for status, n in self.traces.tally("status").items():
            c[status] += n
        return c

    def keys(self, status: str) -> list[str]:
        return sorted(self.traces.keys_where("status", status))

    def index(self) -> dict[str, str]:
        return dict(self._index_pairs())

    def _index_pairs(self):
        """(key, digest) of every rendered trace, in key order."""
        for k in self.keys("done"):
            yield k, self.traces[k]["digest"]

    # --- recording
    def record(self, result: BatchResult | dict, save: bool = True) -> int:
        """Take a batch's result; `save=False` only in memory (`farm status` on a read-only store).
        Returns how many of its traces were pending."""
        if isinstance(result, dict):
            result = BatchResult.from_dict(result)
        was_pending = 0
        for f in result.frames:
            t = self.traces.get(f.key)
            if t is None:
                continue
            was_pending += t["status"] == "pending"
            t.update(status="done" if f.status == "done" else "failed", digest=f.digest, error=f.error)
            if f.missing:
                t["missing"] = list(f.missing)
            else:
                t.pop("missing", None)
            if f.render_s is not None:
                t["render_s"] = f.render_s
            self._dirty.add(f.key)
        if save:
            self.save()
        return was_pending

    def missing_assets(self) -> dict[str, list[str]]:
        """Trace key -> the assets its frame asked for and did not find (frames that rendered)."""
        return {k: m for k in sorted(self.traces.keys_with("missing")) if (m := self.traces[k]["missing"])}

    def merge_worker_results(self, save: bool = True) -> int:
        """Fold in batch results that workers wrote for traces still pending here; returns how many
        (`save=False`: in memory only, the caller saves if it can)."""
        merged = 0
        for batch_id in sorted(self.traces.distinct("batch", "status", "pending")):
            result = self.store.read_batch_result(self.id, batch_id)
            if result:
                merged += self.record(BatchResult.from_dict(result), save=save)
        return merged

    def dispatched(self, batches: list[Batch]) -> None:
        for b in batches:
            self.batches[b.id] = b.to_dict()
            for k in b.keys:
                t = self.traces[k]
                t.update(batch=b.id, status="pending", digest=None, error=None, attempts=t.get("attempts", 0) + 1)
            self._dirty.update(b.keys)
            self._dirty_batches.add(b.id)
        self.store.reset_batches(self.id, [b.id for b in batches])
        self._dirty_runs = True
        self.save()

    def save(self, force: bool = False) -> None:
        """Record the state in the store: one log record with what changed since the last save, or
        the whole document and the index when `force` (the end of a run), when the store holds no
        document of the job yet, or when traces were re-planned."""
        if not self._batches:
            raise JobError(f"job {self.id!r} was loaded without its batches, to show it; it cannot be saved")
        if force or not self._stored or self._whole:
            if self._seq:
                self.data["log"] = self._seq
            self.store.write_job(self.id, self.data)
            self.store.write_index(self.id, self._index_pairs())
            if self._seq:  # the document holds every record: a reader parses none of them again
                self.store.drop_job_log(self.id, self._seq)
            self._stored, self._whole = True, False
        elif self._dirty or self._dirty_batches or self._dirty_runs:
            rec: dict = {"seq": self._seq + 1}
            if self._dirty:
                rec["traces"] = {k: {f: t[f] for f in PROGRESS_FIELDS if f in t}
                                 for k in sorted(self._dirty) if (t := self.traces.get(k)) is not None}
            if self._dirty_batches:
                rec["batches"] = {b: self.batches[b] for b in sorted(self._dirty_batches)}
            if self._dirty_runs:
                rec["runs"] = self.data["runs"]
            self.store.append_job_log(self.id, rec)
            self._seq += 1
        self._dirty.clear()
        self._dirty_batches.clear()
        self._dirty_runs = False

    def replan(self, model_rel: str, publisher: Publisher | None = None) -> list[Batch]:
        """Plan a model again (it did not load, or lacked a sequence, when the job was planned):
        its traces that are not done are replaced by the new plan's; returns the batches to run.
        `publisher`: their inputs travel, published from the read that plans them."""
        plan = expand_plan(ModelPlan.from_dict(self.data["models"][model_rel]),
                           [TraceThresholds(t["match"], t["values"], t.get("line"))
                            for t in self.data.get("trace_thresholds", [])], *_planning(publisher))
        done = {k for k, t in self.traces.items() if t["model"] == model_rel and t["status"] == "done"}
        self._whole = True
        for k in [k for k, t in self.traces.items() if t["model"] == model_rel and k not in done]:
            del self.traces[k]
        out = []
        for b in plan.batches:
            keys = [k for k in b.keys if k not in done]
            if not keys:
                continue
            b = b if len(keys) == len(b.keys) else b.subset(keys)
            for k in b.keys:
                self.traces[k] = _planned({**plan.traces[k], "batch": b.id})
            if b.model_rel in plan.unloadable:  # still does not load: failed as planned, nothing to send
                self.batches[b.id] = b.to_dict()
            else:
                out.append(b)
        return out

    def unloadable(self) -> dict[str, str]:
        """Model -> "<model> does not load: <sentence>", for the models whose frames failed because
        the model did not load when planned (a retry cannot fix them: farm.compare.status)."""
        return {t["model"]: t.get("error") or "" for t in map(self.traces.__getitem__, self.keys("failed"))
                if t.get("cause") in RETRY_CANNOT_FIX}


def _planned(trace: dict, in_place: bool = False) -> dict:
    """A planned trace's state: pending, or failed as planned (its model does not load: cause, error).
    `in_place`: `trace` itself becomes it (a new job takes its plan's traces; no second million dicts)."""
    state = {"status": "failed" if trace.get("cause") else "pending", "digest": None, "error": trace.get("error"),
             "attempts": 0}
    if in_place:
        trace.update(state)
        return trace
    return {**trace, **state}


# --------------------------------------------------------------------------------------------
# Running


def _planning(publisher: Publisher | None) -> tuple:
    """(loader, planned) for farm.plan.batches.expand_plan: a publisher's, so that travelling inputs
    are published from planning's one read of each model; (None, None) when the inputs do not travel."""
    return (publisher.read, publisher.planned) if publisher is not None else (None, None)


def _execute(job: JobState, batches: list[Batch], broker: str | None, workers: int | None,
             progress: bool | None, follow: list | None = None, inputs: str | None = None,
             publisher: Publisher | None = None) -> dict:
    """Send `batches` and follow them, and `follow` ((task id or None, batch) pairs still in flight,
    not sent again), recording every result in the job. `inputs`: whether their inputs travel
    (farm.run.inputs.INPUT_MODES; None: FARM_INPUTS); `publisher`: the one that published some of
    them already, as they were planned (farm.run.inputs.Publisher)."""
    # Longest batches first, so the last ones to finish are short (less idle time at the end).
    batches = sorted(batches, key=lambda b: (-len(b.keys), b.model_rel, b.id))
    frames = sum(len(b.keys) for b in batches) + sum(len(b.keys) for _, b in follow or ())
    run = {"mode": mode(broker), "broker": redact_url(broker), "workers": workers,
           "batches": len(batches), "frames": frames, "started": _now(), "finished": None}
    job.data["runs"].append(run)
    if publisher is not None or travels(job.store, inputs):  # before the batches are recorded as sent
        publisher = publisher or Publisher(job.store)
        publisher.give(batches)  # they carry their inputs
        run["inputs"] = publisher.cost
    job.dispatched(batches)
    t0 = time.monotonic()
    bar = Progress(frames, enabled=progress)

    def on_result(result: BatchResult) -> None:
        job.record(result)
        bar.finish(result.batch, len(result.frames), result.failed)

    try:
        run_batches(job.id, batches, job.store, broker=broker, workers=workers, on_result=on_result, progress=bar,
                    follow=follow)
    finally:
        bar.close()
        run.update(finished=_now(), seconds=round(time.monotonic() - t0, 3))
        job.save(force=True)
    return run


def run_job(manifest: str | Path, out: str | Path | None = None, broker: str | None = None,
            workers: int | None = None, job_id: str | None = None, progress: bool | None = None,
            inputs: str | None = None) -> JobState:
    """Plan a manifest into batches, run them (Celery when a broker is given, else locally), record."""
    m = load_manifest(manifest)
    store = open_store(out or default_out())
    publisher = Publisher(store) if travels(store, inputs) else None  # inputs published as models are read
    plan = expand_manifest(m, *_planning(publisher))
    if not plan.batches:
        raise ManifestError(m.shown_as or m.path, None, "the manifest expands to no frames")
    job = JobState.create(store, m, plan, job_id)  # its document is written when the batches are sent
    _execute(job, plan.runnable(), broker_url(broker, reach=True), workers, progress, inputs=inputs,
             publisher=publisher)
    return job


def retry_job(job_ref: str, out: str | Path | None = None, failed: bool = True, pending: bool = False,
              broker: str | None = None, workers: int | None = None, progress: bool | None = None,
              inputs: str | None = None) -> JobState:
    """Run a job's failed (and/or still pending) traces again, in batches cut the same way."""
    job = JobState.load(job_ref, out)
    job.merge_worker_results()
    wanted = {"failed"} if failed else set()
    if pending:
        wanted.add("pending")
    selected = [k for k, t in sorted(job.traces.items()) if t["status"] in wanted]
    by_batch: dict[str, list[str]] = defaultdict(list)
    for k in selected:
        by_batch[job.traces[k]["batch"]].append(k)
    chosen = {batch_id: Batch.from_dict(job.batches[batch_id]) for batch_id in by_batch}
    # A model that did not load (or lacked a sequence) when planned is planned again as a whole.
    replan = sorted({b.model_rel for b in chosen.values() if b.provisional})
    publisher = Publisher(job.store) if replan and travels(job.store, inputs) else None
    batches: list[Batch] = []
    for rel in replan:
        batches.extend(job.replan(rel, publisher))
    for batch_id, b in sorted(chosen.items()):
        if b.model_rel in replan:
            continue
        keys = by_batch[batch_id]
        batches.append(b if len(keys) == len(b.keys) else b.subset(keys))
    # Pending batches still queued or running (`farm run` was interrupted, its workers went on) are
    # followed, not sent again: sending them twice would render their frames twice.
    broker = broker_url(broker, reach=bool(batches))  # before the job is touched: a broker not there changes nothing
    busy = in_flight(job.id, job.store, broker, [b.id for b in batches]) if pending else {}
    follow = [(busy[b.id], b) for b in batches if b.id in busy]
    batches = [b for b in batches if b.id not in busy]
    if batches or follow:
        _execute(job, batches, broker, workers, progress, follow, inputs=inputs, publisher=publisher)
    return job


def status_text(job: JobState, limit: int = 20) -> str:
    c = job.counts()
    lines = [f"job {job.id}: {c['done']} done, {c['failed']} failed, {c['pending']} pending of {c['total']} frames"
             f" ({job.store.location})"]
    for run in job.data["runs"]:
        where = f"celery {run['broker']}" if run["mode"] == "celery" else f"local, {run.get('workers') or 'auto'}"
        took = f", {run['seconds']} s" if run.get("seconds") is not None else ", unfinished"
        lines.append(f"  run {run['started']}: {run['frames']} frames in {run['batches']} batches ({where}{took})")
    missing = job.missing_assets()
    if missing:
        names = list(dict.fromkeys(n for v in missing.values() for n in v))
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        lines.append(f"warning: {len(missing)} frame(s) drew placeholders for {len(names)} missing asset(s): {shown}"
                     f" (each frame's sidecar says where the search looked; --assets/--game add places to look)")
    failed = job.keys("failed")
    if failed:
        lines.append("failed:")
        for k in failed[:limit]:
            lines.append(f"  {k}: {job.traces[k]['error']}")
        if len(failed) > limit:
            lines.append(f"  ... and {len(failed) - limit} more (all are in {job.store.job_location(job.id)})")
    for model in job.unloadable():
        lines.append(f"{model}: {CAUSE_HINTS[UNLOADABLE]} (farm run {job.data.get('manifest') or 'MANIFEST'})")
    failed = [k for k in failed if job.traces[k].get("cause") not in RETRY_CANNOT_FIX]
    if failed or c["pending"]:
        what = " ".join(f for f, n in (("--failed", len(failed)), ("--pending", c["pending"])) if n)
        lines.append(f"rerun with: farm retry {job.id} {what} --out {job.store.location}")
    return "\n".join(lines)
