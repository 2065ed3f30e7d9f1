"""A worker's bounded cache of travelling inputs (farm.run.inputs): bytes by sha256, on local disk.

    FARM_INPUT_CACHE/ab/<sha256>     an input's bytes (written to tmp/ and renamed: whole or absent)
    FARM_INPUT_CACHE/tmp/            temporary files

`get(digest, fetch)` answers from the cache when the file there still has that sha256 (a damaged
one is dropped and fetched again), else calls `fetch(digest)` (the store's `read_input`, which
checks the sha256 too) and keeps the bytes. The least recently used inputs (by file time: a hit
touches its file) go once the cache holds more than FARM_INPUT_CACHE_MB. Several processes may
share one cache: every write is a rename and an eviction that finds a file gone carries on.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from farm.environment import env_int, env_str
from farm.files import atomic_write

__all__ = ["InputCache", "default_cache_folder"]


def default_cache_folder() -> Path:
    """FARM_INPUT_CACHE, else $XDG_CACHE_HOME/modelfarm/inputs, else ~/.cache/modelfarm/inputs."""
    named = env_str("FARM_INPUT_CACHE")
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "modelfarm" / "inputs"


class InputCache:
    def __init__(self, folder: str | Path, limit_bytes: int):
        self.folder = Path(folder)
        self.limit = int(limit_bytes)
        self.hits = self.misses = 0
        self._size: int | None = None  # bytes held, counted once and then kept up to date

    @classmethod
    def from_env(cls) -> InputCache:
        return cls(default_cache_folder(), env_int("FARM_INPUT_CACHE_MB") * 1024 * 1024)

    def path(self, digest: str) -> Path:
        return self.folder / digest[:2] / digest

    def get(self, digest: str, fetch: Callable[[str], bytes]) -> bytes:
        p = self.path(digest)
        try:
            data = p.read_bytes()
        except OSError:
            data = None
        if data is not None and hashlib.sha256(data).hexdigest() == digest:
            self.hits += 1
            try:
                os.utime(p)  # recently used
            except OSError:
                pass
            return data
        self.misses += 1
        data = fetch(digest)
        if self.limit > 0 and len(data) <= self.limit:
            try:
                atomic_write(p, data, self.folder / "tmp")
                self._grow(len(data))
            except OSError:  # a full or read-only cache disk: the bytes are still good
                pass
        return data

    def _grow(self, added: int) -> None:
        if self._size is None:
            self._size = sum(f.stat().st_size for f in self._files())
        else:
            self._size += added
        if self._size > self.limit:
            self._trim()

    def _files(self) -> list[Path]:
        return [f for f in self.folder.glob("??/*") if f.is_file()]

    def _trim(self) -> None:
        """Drop the least recently used inputs until the cache holds at most its limit."""
        entries = []
        for f in self._files():
            try:
                st = f.stat()
            except OSError:
                continue
            entries.append((st.st_mtime_ns, st.st_size, f))
        entries.sort()
        total = sum(size for _, size, _ in entries)
        for _, size, f in entries:
            if total <= self.limit:
                break
            f.unlink(missing_ok=True)
            total -= size
        self._size = total
