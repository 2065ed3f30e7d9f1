"""Where frames and job state live: the `Store` protocol (base) and its kinds (folder).

`open_store(location)` opens a store from what a job or a worker was given: today a folder path
(farm.store.folder, the default everywhere). A new kind is a module here that implements
farm.store.base.Store, plus its scheme in `open_store`.
"""

from __future__ import annotations

from pathlib import Path

from farm.store.base import Store
from farm.store.folder import FolderStore

__all__ = ["FolderStore", "Store", "open_store"]


def open_store(location: str | Path | Store) -> Store:
    """The store at `location`: a Store is returned as it is; a path (or file:// URL) is a folder."""
    if isinstance(location, Store):
        return location
    text = str(location)
    if text.startswith("file://"):
        text = text[len("file://"):]
    return FolderStore(text)
