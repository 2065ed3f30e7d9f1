"""File primitives every layer of the farm shares: the atomic write, JSON bytes, a file's sha256.

`atomic_write` (renderer.files owns it; re-exported here) writes to a temporary file on the same
file system and renames it into place, so a reader never sees half a file. `json_bytes` is the one
JSON layout of every document we write (sorted keys, one space indent, UTF-8, final newline), so
the same data always gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from renderer.files import atomic_write

__all__ = ["atomic_write", "atomic_write_json", "file_digest", "json_bytes"]


def json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def atomic_write_json(path: str | Path, obj, tmp_dir: str | Path | None = None) -> None:
    atomic_write(path, json_bytes(obj), tmp_dir)


def file_digest(path: str | Path) -> str:
    """sha256 (hex) of a file's bytes, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
