"""Where frames and job state live: the `Store` protocol (base) and its kinds (folder, s3).

`open_store(location)` opens a store from what a job or a worker was given: a folder path
(farm.store.folder, the default everywhere) or an ``s3://BUCKET/PREFIX`` URL (farm.store.s3, which
alone imports boto3). A new kind is a module here that implements farm.store.base.Store, plus its
scheme in `open_store`.
"""

from __future__ import annotations

import re
from pathlib import Path

from farm.store.base import Store
from farm.store.folder import FolderStore

__all__ = ["FolderStore", "Store", "is_url", "open_store", "split_job_url"]

_JOB_URL = re.compile(r"(s3://[^/]+(?:/.+?)?)/jobs/([^/]+)\.json")


def is_url(location: str | Path) -> bool:
    """Whether `location` names a store by URL (not a folder on this machine)."""
    return str(location).startswith("s3://")


def open_store(location: str | Path | Store) -> Store:
    """The store at `location`: a Store is returned as it is; ``s3://...`` is an S3 store; a path (or
    file:// URL) is a folder."""
    if isinstance(location, Store):
        return location
    text = str(location)
    if text.startswith("s3://"):
        from farm.store.s3 import S3Store  # lazily: it imports boto3, which a folder store never needs

        return S3Store(text)
    if text.startswith("file://"):
        text = text[len("file://"):]
    return FolderStore(text)


def split_job_url(ref: str) -> tuple[str, str] | None:
    """(store location, job id) of a job reference given as a URL (``s3://BUCKET/PREFIX/jobs/<id>.json``),
    None for anything else."""
    m = _JOB_URL.fullmatch(ref)
    return (m.group(1), m.group(2)) if m else None
