"""The Store protocol: what the farm asks of a place that holds frames and job state.

Everything above this package (runners, jobs, comparison, reports, thumbnails) talks to a store
only through these methods, never through its paths, so another kind (an object store, say) is one
new module here plus a scheme in `open_store`. The rules every kind keeps:

- Images are content-addressed: `put_image` names PNG bytes by their sha256 and is idempotent.
- Nothing written varies between runs of the same batch (no times, hosts or pids), so a
  redelivered batch writes the same bytes again.
- Writes are atomic: a reader never sees half a document.
- `begin_batch` counts deliveries of a batch safely across processes and machines and `end_batch`
  notes each delivery that ended (done, failed, or handed back for a retry): `unfinished` lists
  the deliveries that began and did not end, by (host, pid) (running now, or their process died),
  which bounds a model that kills its worker and tells a coordinator which batches are in flight;
  `reset_batch` clears both when the coordinator submits the batch.
- Batch results only move forward, per frame: `write_batch_result` merges the new result into the
  stored one under the store's lock (`merge_batch_results`: a frame done stays done, a later
  failure replaces an earlier one) and returns what the store now holds, so a late or redelivered
  worker never turns a good frame back into a failure.
- A job's log is append-only: `append_job_log` adds one record, whole or absent (a kill or a full
  disk mid-append leaves the records before it); `read_job_log` gives them back in order (those
  numbered above `after` at least: the ones a document that holds up to `after` lacks). The job
  document (`write_job`) is replaced whole; what a log record means is the job's business
  (farm.run.jobs), so a progress tick costs what changed, not the whole document.
- A job's inputs (when they travel with it: farm.run.inputs) are content-addressed too:
  `put_input` names bytes by their sha256 (idempotent, atomic); `read_input` gives them back only
  when they still have that sha256 (`checked_input`), so a damaged or half-written input is an
  error, never read as whole.
- `location` is what a worker needs to open the same store (`open_store(location)`).
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from farm.store.documents import StoreError

__all__ = ["Store", "checked_input", "delivery_owner", "input_ref", "merge_batch_results", "open_deliveries"]


@runtime_checkable
class Store(Protocol):
    kind: str

    @property
    def location(self) -> str: ...

    # images (content-addressed) and their sidecars
    def put_image(self, png: bytes, meta: dict) -> str: ...
    def read_image(self, digest: str) -> bytes: ...
    def read_sidecar(self, digest: str) -> dict: ...
    def image_ref(self, digest: str) -> str: ...

    # a job's travelling inputs (model files, textures, tags, tables, the pinned answers), by sha256
    def put_input(self, data: bytes) -> str: ...
    def read_input(self, digest: str) -> bytes: ...  # StoreError when the bytes there are not these

    # batches: delivery counts and results
    def begin_batch(self, job_id: str, batch_id: str) -> int: ...
    def end_batch(self, job_id: str, batch_id: str) -> None: ...
    def deliveries(self, job_id: str, batch_id: str) -> int: ...
    def unfinished(self, job_id: str, batch_id: str) -> list[tuple[str, int]]: ...
    def reset_batch(self, job_id: str, batch_id: str) -> None: ...
    def write_batch_result(self, job_id: str, result: dict) -> dict: ...
    def read_batch_result(self, job_id: str, batch_id: str) -> dict | None: ...
    def remove_batch_result(self, job_id: str, batch_id: str) -> None: ...

    # job documents
    def write_job(self, job_id: str, state: dict) -> None: ...
    def read_job(self, job_id: str) -> dict: ...
    def append_job_log(self, job_id: str, record: dict) -> None: ...
    def read_job_log(self, job_id: str, after: int = 0) -> list[dict]: ...
    def has_job(self, job_id: str) -> bool: ...
    def job_location(self, job_id: str) -> str: ...
    def job_time(self, job_id: str) -> float | None: ...  # when its document was last written (None: unknown)
    def job_ids(self) -> list[str]: ...
    def remove_job(self, job_id: str) -> None: ...
    def write_index(self, job_id: str, index: dict) -> None: ...
    def read_index(self, job_id: str) -> dict: ...

    # artefacts of a job (comparison results, heatmaps, diffs): references are store-relative
    def put_artefact(self, job_id: str, name: str, data: bytes) -> str: ...
    def read_artefact(self, job_id: str, name: str) -> bytes | None: ...
    def local_path(self, ref: str): ...


def input_ref(digest: str) -> str:
    """Where an input's bytes live in a store, relative to it: inputs/ab/<sha256>."""
    return f"inputs/{digest[:2]}/{digest}"


def checked_input(location: str, digest: str, data: bytes) -> bytes:
    """`data` when its sha256 is `digest`; else the StoreError a damaged or half-written input is."""
    if hashlib.sha256(data).hexdigest() != digest:
        raise StoreError(f"{location}/{input_ref(digest)}: the input's bytes do not have its sha256"
                         f" ({len(data)} bytes; damaged, or written part way)")
    return data


def merge_batch_results(old: dict | None, new: dict) -> dict:
    """A batch result moved forward by `new`, frame by frame: a frame done in `old` stays as it was
    (a late delivery's failure, a hard time limit's verdict on the whole batch cannot undo it); any
    other frame takes `new`'s entry (done beats failed; among failures the latest wins). Frames only
    in `old` are kept, in their place; frames only in `new` follow in `new`'s order."""
    if not old or old.get("batch") != new.get("batch"):
        return new
    incoming = {f["key"]: f for f in new.get("frames", ())}
    frames = []
    for f in old.get("frames", ()):
        g = incoming.pop(f["key"], None)
        frames.append(f if g is None or f.get("status") == "done" else g)
    frames.extend(incoming.values())
    return {**old, **{k: v for k, v in new.items() if k != "frames"}, "frames": frames}


def delivery_owner() -> tuple[str, int]:
    """Who `begin_batch` and `end_batch` note a delivery for, as `unfinished` gives it back and a
    worker looks itself up (farm.run.execute): this machine's host name (a space as "_") and pid."""
    return socket.gethostname().replace(" ", "_"), os.getpid()


def open_deliveries(events: Iterable[tuple[str, tuple[str, int]]]) -> list[tuple[str, int]]:
    """`unfinished` from a batch's delivery events, ("x" began or "e" ended, (host, pid)) in the order
    they were noted: the deliveries that began and did not end, sorted. A process runs one batch at
    a time, so starts and ends pair up per process."""
    open_: dict[tuple[str, int], int] = {}
    for what, who in events:
        open_[who] = open_.get(who, 0) + (1 if what == "x" else -1)
    return [who for who, n in sorted(open_.items()) for _ in range(max(0, n))]
