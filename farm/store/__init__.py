"""Where frames and job state live: one domain layer (farm.store.domain.Store) over a kind's storage
primitives (farm.store.base.Objects).

`open_store(location)` opens a store from what a job or a worker was given: a folder path (or
``file://`` URL; farm.store.folder, the default everywhere), or a URL whose scheme is in `KINDS`
(``s3://BUCKET/PREFIX``: farm.store.s3, which alone imports boto3; ``mem://NAME``: farm.store.mem,
in this process's memory, for tests). Any other ``scheme://`` is an error naming the known ones,
never a folder of that name. A new kind is one module of primitives plus its line in `KINDS`.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from farm.store.documents import StoreError
from farm.store.domain import Store
from farm.store.folder import FolderStore

__all__ = ["KINDS", "FolderStore", "Store", "is_url", "open_store", "split_job_url"]

# URL scheme -> "module:callable" that opens a store from its URL (imported when first used).
KINDS = {
    "s3": "farm.store.s3:S3Store",
    "mem": "farm.store.mem:open_mem",
}
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_JOB_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/]*(?:/.+?)?)/jobs/([^/]+)\.json")  # an empty host too


def _scheme(location: str) -> str | None:
    """The URL scheme of `location` (``s3``, ``file``), None for a plain path."""
    m = _SCHEME.match(location)
    return m.group(1).lower() if m else None


def is_url(location: str | Path) -> bool:
    """Whether `location` names a store by URL of a known kind (not a folder on this machine)."""
    return _scheme(str(location)) in KINDS


def open_store(location: str | Path | Store) -> Store:
    """The store at `location`: a Store is returned as it is; a URL of a scheme in KINDS is that
    kind; a path (or file:// URL) is a folder; any other scheme is a StoreError."""
    if isinstance(location, Store):
        return location
    text = str(location)
    scheme = _scheme(text) if isinstance(location, str) else None
    if scheme is None:
        return FolderStore(text)
    if scheme == "file":
        return FolderStore(text[len("file://"):])
    if scheme not in KINDS:
        known = ", ".join(f"{k}://" for k in ("file", *KINDS))
        raise StoreError(f"{text!r}: no store kind for {scheme}:// (known: {known}, or a folder path)")
    module, _, name = KINDS[scheme].partition(":")
    return getattr(importlib.import_module(module), name)(text)


def split_job_url(ref: str) -> tuple[str, str] | None:
    """(store location, job id) of a job reference given as a store URL (``s3://BUCKET/PREFIX/jobs/<id>.json``),
    None for anything else."""
    m = _JOB_URL.fullmatch(ref)
    return (m.group(1), m.group(2)) if m and is_url(m.group(1)) else None
