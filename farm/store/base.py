"""The storage primitives every store kind implements (`Objects`), and the rules the domain layer
above them (farm.store.domain.Store) keeps with them.

A store kind is a small class of primitives over keys (POSIX-style paths relative to the store,
``images/ab/<sha256>.png``): whole objects, read and written atomically, nothing more. Everything
the farm means by them (images by sha256, inputs, batch results merged forward, delivery counts,
job documents and their log, artefacts, a mirrored folder) is farm.store.domain, once, for every
kind. The primitives:

- `get(key)` the bytes (FileNotFoundError when absent); `get_tagged(key)` the bytes and a tag that
  changes whenever the object does (an S3 ETag; a digest of the bytes elsewhere);
- `put(key, data)`: the whole object, atomically (a reader sees the old bytes or the new, never half);
- `put_if_absent(key, data) -> bool`: write only when there is no such object (False: there was);
  for content-addressed names, where what is there is these bytes;
- `swap(key, data, tag) -> str | None`: compare-and-swap: write when the object's tag is still
  `tag` (None: when it is absent); its new tag, or None when another writer came first;
- `list(prefix, deep=True)`: keys under a prefix ending in "/", relative to it, sorted (`deep=False`:
  only those with no further "/");
- `delete(keys)`: absent keys are no error; `head(key)`: when it was last written (None: absent);
- `file(key)`: the local file behind a key where one exists (the folder store), else None; the
  domain layer then appends to it (job logs, delivery events) instead of writing an object a record;
- `url(key)`: the key's name for messages and for `job_location` (a path, an s3:// URL);
- `location` (what `open_store` opens again), `kind`, and `parallel`: how many requests may be
  in flight at once to good effect (1 for a local folder; more for a store across a network).

The rules every kind keeps (the domain layer relies on them):

- Nothing written varies between runs of the same batch (no times, hosts or pids), so a
  redelivered batch writes the same bytes again; images and inputs are content-addressed.
- `swap` is atomic across processes and machines (a file lock and a rename; S3's If-Match /
  If-None-Match): batch results only move forward (`merge_batch_results`), whoever writes.
- `delivery_owner` names who noted a delivery as `unfinished` gives it back.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol, runtime_checkable

from farm.store.documents import StoreError

__all__ = ["Objects", "checked_input", "delivery_owner", "input_ref", "merge_batch_results", "open_deliveries"]


@runtime_checkable
class Objects(Protocol):
    kind: str
    location: str
    parallel: int

    def get(self, key: str) -> bytes: ...
    def get_tagged(self, key: str) -> tuple[bytes, str]: ...
    def put(self, key: str, data: bytes) -> None: ...  # bytes; an iterable of bytes pieces too where `streams`
    def put_if_absent(self, key: str, data: bytes) -> bool: ...
    def swap(self, key: str, data: bytes, tag: str | None) -> str | None: ...
    def list(self, prefix: str, deep: bool = True) -> list[str]: ...
    def delete(self, keys: Iterable[str]) -> None: ...
    def head(self, key: str) -> float | None: ...
    def file(self, key: str) -> Path | None: ...
    def url(self, key: str) -> str: ...


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
