"""The store's domain layer: what the farm keeps in a store, over any kind's primitives
(farm.store.base.Objects), the same for every kind.

    images/ab/<sha256>.png           frames, named by the sha256 of their PNG bytes (written once)
    images/ab/<sha256>.json          sidecar: the trace and diagnostics (stores before 0.4; now in
                                     the batch result's frame, "sidecar")
    inputs/ab/<sha256>               a job's travelling inputs (farm.run.inputs), named by their sha256
    jobs/<job>.json                  job state (farm.run.jobs), replaced whole
    jobs/<job>/index.json            trace key -> image digest, for the traces that rendered
    jobs/<job>/log.jsonl             the job state's changes, a JSON line each, where the kind has
                                     local files (append-only); elsewhere
    jobs/<job>/log/<seq>-<h>.json    one object per record, named by its number and a digest of it
    jobs/<job>/batches/<id>.json     each batch's result, merged forward by compare-and-swap
    jobs/<job>/attempts/<id>         "x HOST PID" per delivery of a batch, "e HOST PID" when it ended
                                     (local files); elsewhere one empty object per event:
    jobs/<job>/attempts/<id>/<what>-<token>-<pid>-<host>
    jobs/<job>/<name>                artefacts: comparison.json, heatmaps/, diff-<job>.json

The rules (farm.store.base has those of the primitives):

- Images and inputs are content-addressed: `put_image` and `put_input` write only when absent
  (`put_if_absent`: one request, no look first); `read_input` gives bytes back only when they still
  have their sha256 (`checked_input`). Where the kind allows overlapping requests (`parallel` > 1)
  an image is written in the background; `write_batch_result` waits for them first, so a result
  never names an image that is not there.
- `begin_batch` counts deliveries of a batch safely across processes and machines and `end_batch`
  notes each delivery that ended; `unfinished` lists those that began and did not end, by (host,
  pid); `reset_batch` clears them when the coordinator submits the batch. Nothing is read, changed
  and written back: an O_APPEND line, or an object of its own, per event.
- Batch results only move forward, per frame: `write_batch_result` merges the new result into the
  stored one (`merge_batch_results`) with `swap` (compare-and-swap; another writer in between: read
  and merge again) and returns what the store now holds. What this store wrote last for a batch
  (the document and its tag) is kept, so the next merge needs no read while no one else wrote; a
  first write where requests cost (`parallel` > 1) assumes the result absent (its swap fails when
  it is not: then read). `record_frames` merges frames along the way (farm.store.along: at once, or
  in the background and coalesced where the kind overlaps requests).
- A job's log is append-only: `append_job_log` adds one record, whole or absent; `read_job_log`
  gives them back in order (those numbered above `after` at least). The job document (`write_job`)
  is replaced whole.
- `location` is what a worker needs to open the same store (`open_store(location)`).
"""

from __future__ import annotations

import atexit
import hashlib
import io
import json
import os
import posixpath
import random
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterable, MutableMapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, unquote

from farm.files import (
    append_json_line,
    append_line,
    atomic_write,
    encoded,
    json_bytes,
    json_mapping_chunks,
    json_wide_encoded,
    read_json_lines,
    read_wide_json,
)
from farm.store.along import Along
from farm.store.base import Objects, checked_input, delivery_owner, input_ref, merge_batch_results, open_deliveries
from farm.store.documents import StoreError, check_batch_result, check_job, check_job_traces, read_document

__all__ = ["CAS_ATTEMPTS", "Store"]

CAS_ATTEMPTS = 100  # rounds of read-merge-write a batch result gets against concurrent writers
AHEAD = 4  # image writes a store has in flight before the next waits for the oldest (see put_image)
WRITTEN = 16  # batch results whose last write (document, tag) a store keeps, so the next merge reads nothing


class _Doc:
    """An object as farm.store.documents.read_document reads a file: its bytes (and tag), its name."""

    def __init__(self, objects: Objects, key: str):
        self.objects, self.key = objects, key
        self.tag: str | None = None

    def read_bytes(self) -> bytes:
        data, self.tag = self.objects.get_tagged(self.key)
        return data

    def __str__(self) -> str:
        return self.objects.url(self.key)


def _checked_into(traces: MutableMapping, doc: _Doc):
    """`put(entries)` for read_wide_json: each trace checked as check_job checks them, then kept (a
    TraceTable takes a block at once)."""
    def put(entries: dict) -> None:
        problem = check_job_traces(entries)
        if problem:
            raise StoreError(f"{doc}: {problem}")
        (traces.add if hasattr(traces, "add") else traces.update)(entries)
    return put


def _batch_into(batches: dict, traces):
    """`put(entries)` for read_wide_json: the batches, their trace keys the string objects of the
    traces read before them (`write_job` writes the traces first), not a second million strings."""
    same = getattr(traces, "key_object", None) or (lambda k: k)

    def put(entries: dict) -> None:
        for batch in entries.values():
            if isinstance(batch, dict) and isinstance(batch.get("keys"), list):
                batch["keys"] = [same(k) for k in batch["keys"]]
        batches.update(entries)
    return put


class Store:
    """A store: the farm's documents over a kind's primitives (see the module docstring)."""

    def __init__(self, objects: Objects):
        self.objects = objects
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid: int | None = None
        self._pending: list[Future] = []
        self._cache: Path | None = None
        self._batch_results: dict[tuple[str, str], dict] = {}  # frame_sidecar's reads: key -> frame
        self._written: dict[str, tuple[dict, str]] = {}  # batch result key -> (document, tag) this store wrote
        self._along = Along(self._merge_batch_result, lambda fn: self._executor().submit(fn))

    @property
    def kind(self) -> str:
        return self.objects.kind

    @property
    def location(self) -> str:
        return self.objects.location

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    def _map(self, fn, items) -> list:
        """fn over items, in order; overlapping when the kind is worth it (`parallel` > 1)."""
        items = list(items)
        if self.objects.parallel <= 1 or len(items) < 2:
            return [fn(x) for x in items]
        return list(self._executor().map(fn, items))

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None or self._pool_pid != os.getpid():  # a forked child makes its own
            self._pool, self._pool_pid = ThreadPoolExecutor(self.objects.parallel), os.getpid()
            self._pending = []
        return self._pool

    def flush(self) -> None:
        """Wait for the writes still in the background; the first one that failed raises."""
        pending, self._pending = self._pending, []
        for f in pending:
            f.result()

    def _images_written(self) -> None:
        """Wait for the image writes in the background now (from any thread; failures raise in flush)."""
        for f in list(self._pending):
            f.exception()

    # --- layout (keys, store-relative)
    def image_ref(self, digest: str) -> str:
        return f"images/{digest[:2]}/{digest}.png"

    def sidecar_ref(self, digest: str) -> str:
        return f"images/{digest[:2]}/{digest}.json"

    def job_ref(self, job_id: str) -> str:
        return f"jobs/{job_id}.json"

    def batch_ref(self, job_id: str, batch_id: str) -> str:
        return f"jobs/{job_id}/batches/{batch_id}.json"

    # --- images (content-addressed) and their sidecars
    def put_image(self, png: bytes, meta: dict | None = None) -> str:
        """Store PNG bytes (once: only if absent), and with `meta` their sidecar object; returns the
        digest (sha256 hex of the bytes). Where the kind overlaps requests, in the background."""
        digest = hashlib.sha256(png).hexdigest()
        if self.objects.parallel > 1:
            pool = self._executor()
            self._pending = [f for f in self._pending if not f.done() or f.exception()]
            if len(self._pending) >= AHEAD:  # bounded: PNG bytes held in memory while the store is slow
                self._pending[-AHEAD].exception()
            self._pending.append(pool.submit(self._write_image, digest, png, meta))
        else:
            self._write_image(digest, png, meta)
        return digest

    def _write_image(self, digest: str, png: bytes, meta: dict | None) -> None:
        fresh = self.objects.put_if_absent(self.image_ref(digest), png)
        if meta is None:
            return
        data = json_bytes({"digest": digest, "bytes": len(png), **meta})
        if not fresh:
            try:
                fresh = self.objects.get(self.sidecar_ref(digest)) != data
            except FileNotFoundError:
                fresh = True
        if fresh:
            self.objects.put(self.sidecar_ref(digest), data)

    def read_image(self, digest: str) -> bytes:
        return self.objects.get(self.image_ref(digest))

    def read_sidecar(self, digest: str) -> dict:
        """An image's sidecar object (stores written before sidecars travelled in batch results)."""
        return json.loads(self.objects.get(self.sidecar_ref(digest)))

    def frame_sidecar(self, job_id: str, batch_id: str | None, key: str, digest: str) -> dict | None:
        """The sidecar of a job's frame (trace, diagnostics, assets, blank): from its batch result,
        where workers put it (one read per batch, kept while this store is open), else the image's
        sidecar object of an older store; None when there is neither."""
        if batch_id:
            result = self._batch_results.get((job_id, batch_id))
            if result is None:
                try:
                    result = self.read_batch_result(job_id, batch_id) or {}
                except StoreError:
                    result = {}
                self._batch_results[job_id, batch_id] = {f.get("key"): f for f in result.get("frames", ())}
                result = self._batch_results[job_id, batch_id]
            frame = result.get(key) or {}
            if isinstance(frame.get("sidecar"), dict) and frame.get("digest") == digest:
                return frame["sidecar"]
        try:
            return self.read_sidecar(digest)
        except (OSError, ValueError):
            return None

    # --- a job's travelling inputs, by sha256
    def put_input(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self.objects.put_if_absent(input_ref(digest), data)
        return digest

    def read_input(self, digest: str) -> bytes:
        return checked_input(self.location, digest, self.objects.get(input_ref(digest)))

    # --- batches: delivery events
    def begin_batch(self, job_id: str, batch_id: str) -> int:
        """Count a delivery of a batch by this process; returns which one this is (1 for the first:
        a file of events that was empty before this one is not read back)."""
        before = self._event(job_id, batch_id, "x")
        return 1 if before == 0 else self.deliveries(job_id, batch_id)

    def end_batch(self, job_id: str, batch_id: str) -> None:
        """Note that this process's delivery of a batch ended (it did not die in it)."""
        self._event(job_id, batch_id, "e")

    def _attempts_ref(self, job_id: str, batch_id: str) -> str:
        return f"jobs/{job_id}/attempts/{batch_id}"

    def _event(self, job_id: str, batch_id: str, what: str) -> int | None:
        """Note a delivery event; returns the length of the batch's events file before it (None: objects)."""
        host, pid = delivery_owner()
        ref = self._attempts_ref(job_id, batch_id)
        path = self.objects.file(ref)
        if path is not None:  # one small O_APPEND write per event
            return append_line(path, b"%s %s %d\n" % (what.encode(), host.encode("utf-8", "replace"), pid))
        self.objects.put(f"{ref}/{what}-{secrets.token_hex(8)}-{pid}-{quote(host, safe='')}", b"")
        return None

    def _events(self, job_id: str, batch_id: str) -> list[tuple[str, tuple[str, int]]]:
        """(what, (host, pid)) of each delivery event of a batch, in the order noted (local files) or
        in key order (objects: begun and ended pair up per process either way)."""
        ref = self._attempts_ref(job_id, batch_id)
        path = self.objects.file(ref)
        if path is not None:
            try:
                text = path.read_bytes().decode("utf-8", "replace")
            except FileNotFoundError:
                return []
            rows = [line.split() for line in text.splitlines() if line.strip()]
            return [(r[0], (r[1] if len(r) > 1 else "", int(r[2]) if len(r) > 2 and r[2].isdigit() else 0))
                    for r in rows]
        out = []
        for name in self.objects.list(ref + "/"):
            what, _, rest = name.partition("-")
            _token, _, rest = rest.partition("-")
            pid, _, host = rest.partition("-")
            out.append((what, (unquote(host), int(pid) if pid.isdigit() else 0)))
        return out

    def deliveries(self, job_id: str, batch_id: str) -> int:
        """How many times a batch was started since it was last submitted (0: never)."""
        return sum(what == "x" for what, _ in self._events(job_id, batch_id))

    def unfinished(self, job_id: str, batch_id: str) -> list[tuple[str, int]]:
        """The deliveries of a batch that began and did not end, as (host, pid) of their process:
        running now (or stopped), or their process died (base.open_deliveries)."""
        return open_deliveries(self._events(job_id, batch_id))

    def reset_batches(self, job_id: str, batch_ids: list[str]) -> None:
        """Forget each batch's deliveries and result (the coordinator submitting them), overlapping
        where the kind allows (a list and a delete a batch on S3)."""
        self._map(lambda b: (self.reset_batch(job_id, b), self.remove_batch_result(job_id, b)), batch_ids)

    def deliveries_of(self, job_id: str, batch_ids: list[str]) -> dict[str, int]:
        """`deliveries` of each batch, overlapping where the kind allows (none read in a folder store
        whose job has no delivery yet: a fresh run's thousands of batches)."""
        folder = self.objects.file(self._attempts_ref(job_id, "").rstrip("/"))
        if folder is not None and not folder.is_dir():
            return dict.fromkeys(batch_ids, 0)
        return dict(zip(batch_ids, self._map(lambda b: self.deliveries(job_id, b), batch_ids), strict=True))

    def reset_batch(self, job_id: str, batch_id: str) -> None:
        """Forget a batch's deliveries (the coordinator does this when it submits the batch)."""
        ref = self._attempts_ref(job_id, batch_id)
        path = self.objects.file(ref)
        if path is not None:
            path.unlink(missing_ok=True)
        else:
            self.objects.delete(f"{ref}/{k}" for k in self.objects.list(ref + "/"))

    # --- batch results: merged forward by compare-and-swap
    def write_batch_result(self, job_id: str, result: dict) -> dict:
        """Merge `result` into the stored one (base.merge_batch_results) and write it if the stored one
        is still the one read (`swap`); another writer in between: read and merge again. Images still
        being written in the background are waited for first, and so is the write `record_frames` has
        in flight for this batch (the frames it still holds queued go with this one). Returns what the
        store now holds."""
        queued = self._along.settle(job_id, result["batch"])
        if queued:  # older than `result`: merged under it
            result = merge_batch_results({"batch": result["batch"], "frames": queued}, result)
        self.flush()
        return self._merge_batch_result(job_id, result)

    def record_frames(self, job_id: str, result: dict) -> None:
        """Merge a few frames of a batch into its stored result along the way (a worker after each
        frame): at once where requests are cheap (`parallel` 1), else in the background, coalesced
        (farm.store.along); the batch's `write_batch_result` waits for them."""
        if self.objects.parallel <= 1:
            self.write_batch_result(job_id, result)
        else:
            self._along.add(job_id, result)

    def _merge_batch_result(self, job_id: str, result: dict) -> dict:
        """The compare-and-swap loop of write_batch_result, once the images it names are stored."""
        self._images_written()
        key = self.batch_ref(job_id, result["batch"])
        known = self._written.pop(key, None)
        if known is None and self.objects.parallel > 1:
            known = (None, None)  # assumed absent: a request saved on a first write, a failed swap if not
        for attempt in range(CAS_ATTEMPTS):
            old, tag = known if known is not None else self._stored_result(key)
            known = None
            merged = merge_batch_results(old, result)
            new_tag = self.objects.swap(key, json_bytes(merged), tag)
            if new_tag is not None:
                self._written[key] = (merged, new_tag)
                while len(self._written) > WRITTEN:
                    self._written.pop(next(iter(self._written)))
                return merged
            if attempt:
                time.sleep(random.uniform(0, min(1.0, 0.02 * 2 ** attempt)))  # changed or removed since read
        raise StoreError(f"{self.location}: batch result {key} kept changing under {CAS_ATTEMPTS} attempts to merge"
                         f" into it; too many workers write this batch at once")

    def _stored_result(self, key: str) -> tuple[dict | None, str | None]:
        """A batch result as stored and its tag; (None, None) when there is none or it is damaged."""
        doc = _Doc(self.objects, key)
        try:
            return read_document(doc, check_batch_result), doc.tag
        except FileNotFoundError:
            return None, None
        except (ValueError, RuntimeError):  # not a batch result (damaged): replaced
            return None, doc.tag

    def read_batch_result(self, job_id: str, batch_id: str) -> dict | None:
        """The batch's result, None when there is none (StoreError when it is not a batch result)."""
        try:
            return read_document(_Doc(self.objects, self.batch_ref(job_id, batch_id)), check_batch_result)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def remove_batch_result(self, job_id: str, batch_id: str) -> None:
        self._written.pop(self.batch_ref(job_id, batch_id), None)
        self.objects.delete([self.batch_ref(job_id, batch_id)])

    # --- jobs
    def write_job(self, job_id: str, state: dict) -> None:
        """The job's document, one trace a line (`json_wide_chunks`; a reader may take it a line at a
        time), written in pieces where the kind has local files: never one string of a million traces."""
        self._put_pieces(self.job_ref(job_id), json_wide_encoded(state, ("traces", "batches")))

    def _put_pieces(self, key: str, data) -> None:
        """Put bytes, or an iterable of bytes pieces: written as they come where the objects take pieces
        (`streams`: a folder), else joined first (an object store's one PUT)."""
        if not isinstance(data, bytes | bytearray | memoryview) and not getattr(self.objects, "streams", False):
            data = b"".join(data)
        self.objects.put(key, data)

    def read_job(self, job_id: str, traces: MutableMapping | None = None, *, batches: bool = True) -> dict:
        """The job's document, checked. With `traces` (an empty mapping to fill: farm.plan.traces'
        TraceTable), a document written one trace a line (`write_job`) is read a line at a time, each
        trace checked and put there, so a million traces are never parsed objects all at once; the
        document returned holds `traces`. An older, indented document is read whole. `batches=False`
        (with `traces`): the batches are passed over unread and the document holds none (a reader
        that only shows traces: `farm status` of a million frames)."""
        doc = _Doc(self.objects, self.job_ref(job_id))
        if traces is None:
            return read_document(doc, check_job)
        kept: dict[str, dict] = {}
        try:
            with self._reader(doc.key) as f:
                data = read_wide_json(f.read, {"traces": _checked_into(traces, doc),
                                               "batches": _batch_into(kept, traces) if batches else None})
        except ValueError:  # not one trace a line (or not JSON: read_document says which)
            traces.clear()
            data = read_document(doc, check_job)
            traces.update(data["traces"])
            kept = data["batches"] if batches else {}
        problem = check_job(data)
        if problem:
            raise StoreError(f"{doc}: {problem}")
        data["traces"], data["batches"] = traces, kept
        return data

    def _reader(self, key: str):
        """An object's bytes as a binary file: its file where the kind has one, else its body."""
        path = self.objects.file(key)
        return io.BytesIO(self.objects.get(key)) if path is None else open(path, "rb")

    def append_job_log(self, job_id: str, record: dict) -> None:
        """Add one record to the job's log, whole or absent: a JSON line where the kind has local
        files, else an object named by its number and a digest of its bytes (written twice: once)."""
        path = self.objects.file(f"jobs/{job_id}/log.jsonl")
        if path is not None:
            append_json_line(path, record)
            return
        data = json_bytes(record)
        seq = record.get("seq")
        name = f"{seq:012d}" if isinstance(seq, int) and seq >= 0 else "zzzzzzzzzzzz"
        self.objects.put(f"jobs/{job_id}/log/{name}-{hashlib.sha256(data).hexdigest()[:16]}.json", data)

    def read_job_log(self, job_id: str, after: int = 0) -> list[dict]:
        """The log's records in order: a JSON-lines file whole (the reader skips those numbered `after`
        or below), or the objects numbered above `after` (their names say so: no GET for a record the
        job document already holds); one that is not a JSON object raises ValueError naming it."""
        path = self.objects.file(f"jobs/{job_id}/log.jsonl")
        if path is not None:
            return read_json_lines(path)
        prefix = f"jobs/{job_id}/log/"
        names = [n for n in self.objects.list(prefix) if not (n[:12].isdigit() and int(n[:12]) <= after)]

        def fetch(name: str) -> bytes | None:
            try:
                return self.objects.get(prefix + name)
            except FileNotFoundError:
                return None  # removed since the listing

        out = []
        for name, raw in zip(names, self._map(fetch, names), strict=True):
            if raw is None:
                continue
            url = self.objects.url(prefix + name)
            try:
                rec = json.loads(raw)
            except ValueError as e:
                raise ValueError(f"{url}: not valid JSON ({e})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{url}: expected a JSON object, got {type(rec).__name__}")
            out.append(rec)
        return out

    def drop_job_log(self, job_id: str, upto: int) -> None:
        """Forget the log's records numbered `upto` or below, once the job's document holds them (it
        says so in its ``log``, and was written first): the coordinator that wrote the log calls this,
        so no record above `upto` exists; a reader that read the document before finds the records it
        needs gone only if that document is older than the one written, and shows that older state."""
        path = self.objects.file(f"jobs/{job_id}/log.jsonl")
        if path is not None:
            path.unlink(missing_ok=True)
            return
        prefix = f"jobs/{job_id}/log/"
        self.objects.delete([prefix + n for n in self.objects.list(prefix) if n[:12].isdigit() and int(n[:12]) <= upto])

    def write_index(self, job_id: str, index) -> None:
        """The job's index (trace key -> image digest): a mapping, or (key, digest) pairs in key order."""
        pairs = sorted(index.items()) if isinstance(index, dict) else index
        self._put_pieces(f"jobs/{job_id}/index.json", encoded(json_mapping_chunks(pairs)))

    def read_index(self, job_id: str) -> dict:
        try:
            return json.loads(self.objects.get(f"jobs/{job_id}/index.json"))
        except FileNotFoundError:
            return {}

    def job_ids(self) -> list[str]:
        return sorted(k[:-5] for k in self.objects.list("jobs/", deep=False) if k.endswith(".json"))

    def has_job(self, job_id: str) -> bool:
        return self.objects.head(self.job_ref(job_id)) is not None

    def job_location(self, job_id: str) -> str:
        return self.objects.url(self.job_ref(job_id))

    def job_time(self, job_id: str) -> float | None:
        """When the job's document was last written; None when it is not there."""
        return self.objects.head(self.job_ref(job_id))

    def remove_job(self, job_id: str) -> None:
        """Forget a job: its document and everything under jobs/<job>/ (images stay: they are shared)."""
        prefix = f"jobs/{job_id}/"
        self.objects.delete([self.job_ref(job_id), *(prefix + k for k in self.objects.list(prefix))])

    # --- artefacts of a job (comparison results, heatmaps, diffs): references are store-relative
    def put_artefact(self, job_id: str, name: str, data: bytes | Iterable[bytes]) -> str:
        """Store `data` as the job's artefact `name` (a relative POSIX path); returns its reference.
        `data` may be an iterable of bytes chunks (a document too large to hold whole: a comparison of
        100k traces): written piece by piece where the objects take pieces (`streams`: a folder), else
        joined first (an object store's PUT)."""
        ref = self._artefact_ref(job_id, name)
        self._put_pieces(ref, data)
        return ref

    def read_artefact(self, job_id: str, name: str) -> bytes | None:
        try:
            return self.objects.get(self._artefact_ref(job_id, name))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def open_artefact(self, job_id: str, name: str):
        """The job's artefact `name` as a binary file to read in pieces (a document too large to hold whole:
        farm.compare.runs.load_results), from `local_path`; None when there is none."""
        path = self.local_path(self._artefact_ref(job_id, name))
        return open(path, "rb") if path is not None else None

    def _artefact_ref(self, job_id: str, name: str) -> str:
        norm = posixpath.normpath(name)
        if name.startswith("/") or norm == "." or norm.split("/")[0] == "..":
            raise ValueError(f"artefact name {name!r} leaves the job's folder")
        return f"jobs/{job_id}/{norm}"

    def local_path(self, ref: str) -> Path | None:
        """The file behind a reference (put_artefact's or image_ref's) on this machine, for whoever
        copies files (reports): the store's own where it has local files, else a copy in a temporary
        folder removed when the process exits; None when there is no such object."""
        norm = posixpath.normpath(ref)
        if ref.startswith("/") or norm.split("/")[0] in ("..", "."):
            return None
        path = self.objects.file(norm)
        if path is not None:
            return path if path.is_file() else None
        try:
            data = self.objects.get(norm)
        except FileNotFoundError:
            return None
        if self._cache is None:
            self._cache = Path(tempfile.mkdtemp(prefix=f"farm-{self.kind}-"))
            atexit.register(shutil.rmtree, self._cache, True)
        path = self._cache / norm
        atomic_write(path, data, self._cache)
        return path
