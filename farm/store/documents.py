"""The JSON documents a store hands back, checked as they are read: a job document (jobs/<job>.json)
and a batch result (jobs/<job>/batches/<id>.json). A file that is not JSON, or JSON of the wrong
shape (``[]``, a frame without its key, a status no one writes), is a `StoreError` naming the file
and what is wrong, one sentence the command line prints as it is, never a KeyError or TypeError
in whoever reads it next.

Only the shape is checked here (what every reader indexes without looking); what a job's fields
mean stays with their owners (farm.run.jobs: its format; farm.run.execute: BatchResult). A frame of
a batch result is `FrameResult`, defined here once: its fields' types are the check, and a field
it does not know (written by a newer worker) passes through, kept in `extra` and written back, so
a rolling upgrade never turns an additive field into an error.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType

__all__ = ["FRAME_FIELDS", "FrameResult", "StoreError", "check_batch_result", "check_job", "check_job_log_record",
           "read_document"]

TRACE_STATUSES = ("pending", "done", "failed")  # a trace's status in a job document
FRAME_STATUSES = ("done", "failed")  # a frame's status in a batch result


@dataclass
class FrameResult:
    """A frame of a batch result, as a worker reports it and the store keeps it."""

    key: str
    time_ms: int
    status: str  # "done" | "failed"
    digest: str | None = None
    error: str | None = None
    info: dict | None = None  # what a batch of another kind reports about the frame (JSON-ready)
    missing: list[str] | None = None  # assets the frame asked for and the search did not find
    render_s: float | None = None  # seconds the renderer took (reported to the coordinator, never stored)
    sidecar: dict | None = None  # the frame's trace, diagnostics, assets, blank: stored, never sent back
    extra: dict = field(default_factory=dict, repr=False)  # fields of a newer writer: kept, written back

    def to_dict(self, times: bool = False) -> dict:
        return {**self.extra, "key": self.key, "time_ms": self.time_ms, "status": self.status, "digest": self.digest,
                "error": self.error, **({"info": self.info} if self.info is not None else {}),
                **({"missing": list(self.missing)} if self.missing else {}),
                **({"render_s": self.render_s} if times and self.render_s is not None else {}),
                **({"sidecar": self.sidecar} if self.sidecar is not None and not times else {})}

    @classmethod
    def from_dict(cls, d: dict) -> FrameResult:
        """The frame of a stored (checked) result; fields this version does not know go to `extra`."""
        return cls(**{k: v for k, v in d.items() if k in FRAME_FIELDS},
                   extra={k: v for k, v in d.items() if k not in FRAME_FIELDS and k != "extra"})


def _json_types(hint) -> tuple:
    """The JSON types a field annotated `hint` may hold (None: null or absent; a float may be an int)."""
    args = typing.get_args(hint) if isinstance(hint, UnionType) or typing.get_origin(hint) is typing.Union \
        else (hint,)
    out: list = []
    for a in args:
        a = typing.get_origin(a) or a
        out += [None] if a is type(None) else [int, float] if a is float else [a]
    return tuple(out)


# A frame of a batch result: field -> the types it may have (None: may be null or absent), from FrameResult.
FRAME_FIELDS: dict[str, tuple] = {f.name: _json_types(typing.get_type_hints(FrameResult)[f.name])
                                  for f in dataclasses.fields(FrameResult) if f.name != "extra"}


class StoreError(RuntimeError):
    """A document in the store that cannot be used; the message names the file."""


_JSON_NAMES = {dict: "an object", list: "an array", str: "a string", int: "an integer", float: "a number",
               bool: "a boolean", type(None): "null"}


def _kind(value) -> str:
    """JSON's name for a value's type."""
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _names(types: tuple) -> str:
    return " or ".join(_JSON_NAMES[t if t is not None else type(None)] for t in types)


def _fits(value, types: tuple) -> bool:
    if value is None:
        return None in types
    return isinstance(value, tuple(t for t in types if t is not None)) and not isinstance(value, bool)


def read_document(path: Path, check) -> dict:
    """The JSON object in `path`, checked by `check(doc)` (which returns a problem or None).
    FileNotFoundError passes through (the caller says what is missing)."""
    raw = path.read_bytes()
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise StoreError(f"{path} is not valid JSON ({e}); the store holds only whole documents, so this"
                         f" file was changed by hand or damaged") from None
    problem = check(doc)
    if problem:
        raise StoreError(f"{path}: {problem}")
    return doc


def check_job(doc) -> str | None:
    """What is wrong with a job document's shape, or None."""
    if not isinstance(doc, dict):
        return f"a job document is a JSON object, not {_kind(doc)}"
    if "format" not in doc:
        return None  # not a job file at all: farm.run.jobs says so, naming the format it expects
    for name, kind in (("job", str), ("traces", dict), ("batches", dict)):
        if not isinstance(doc.get(name), kind):
            return f"'{name}' must be {_names((kind,))}, not {_kind(doc.get(name))}"
    if "runs" in doc and not isinstance(doc["runs"], list):
        return f"'runs' must be an array, not {_kind(doc['runs'])}"
    if not _fits(doc.get("log"), (int, None)):
        return f"'log' must be an integer (the last log record it holds), not {_kind(doc.get('log'))}"
    return check_job_traces(doc["traces"])


def check_job_traces(traces: dict) -> str | None:
    """What is wrong with the first wrong trace of a job document (or a block of its traces), or None:
    the traces looked over in one pass, a million of them read back in blocks (farm.store.domain)."""
    wrong = next((k for k, t in traces.items() if not isinstance(t, dict) or t.get("status") not in TRACE_STATUSES),
                 None)
    return None if wrong is None else check_job_trace(wrong, traces[wrong])


def check_job_trace(key: str, trace) -> str | None:
    """What is wrong with one trace of a job document, or None."""
    if not isinstance(trace, dict):
        return f"trace {key!r} must be an object, not {_kind(trace)}"
    if trace.get("status") not in TRACE_STATUSES:
        return f"trace {key!r} has status {trace.get('status')!r}, not one of {', '.join(TRACE_STATUSES)}"
    return None


def check_job_log_record(rec: dict) -> str | None:
    """What is wrong with the shape of a record of a job's log (Store.read_job_log; farm.run.jobs
    writes them: seq, and what changed of traces, batches, runs), or None."""
    if not _fits(rec.get("seq"), (int,)):
        return f"'seq' must be an integer (the record's number), not {_kind(rec.get('seq'))}"
    for name, kind in (("traces", dict), ("batches", dict), ("runs", list)):
        if name in rec and not isinstance(rec[name], kind):
            return f"'{name}' must be {_names((kind,))}, not {_kind(rec[name])}"
    for key, fields in rec.get("traces", {}).items():
        if not isinstance(fields, dict):
            return f"trace {key!r} must be an object, not {_kind(fields)}"
        if "status" in fields and fields["status"] not in TRACE_STATUSES:
            return f"trace {key!r} has status {fields['status']!r}, not one of {', '.join(TRACE_STATUSES)}"
    for batch_id, batch in rec.get("batches", {}).items():
        if not isinstance(batch, dict):
            return f"batch {batch_id!r} must be an object, not {_kind(batch)}"
    return None


def check_batch_result(doc) -> str | None:
    """What is wrong with a batch result's shape, or None."""
    if not isinstance(doc, dict):
        return f"a batch result is a JSON object, not {_kind(doc)}"
    if not isinstance(doc.get("batch"), str):
        return f"'batch' must be a string (the batch id), not {_kind(doc.get('batch'))}"
    frames = doc.get("frames")
    if not isinstance(frames, list):
        return f"'frames' must be an array, not {_kind(frames)}"
    for i, f in enumerate(frames):
        if not isinstance(f, dict):
            return f"frames[{i}] must be an object, not {_kind(f)}"
        for name, types in FRAME_FIELDS.items():
            if not _fits(f.get(name), types):
                return f"frames[{i}] '{name}' must be {_names(types)}, not {_kind(f.get(name))}"
        if f["status"] not in FRAME_STATUSES:
            return f"frames[{i}] has status {f['status']!r}, not one of {', '.join(FRAME_STATUSES)}"
    return None
