"""The in-memory store, ``mem://NAME``: the storage primitives (farm.store.base.Objects) as a dict,
shared by every store opened on NAME in this process (threads see one another's writes; other
processes see nothing). For tests, and as the smallest kind: everything else is farm.store.domain.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from farm.store.documents import StoreError
from farm.store.domain import Store

__all__ = ["MemObjects", "open_mem"]

_SPACES: dict[str, dict[str, tuple[bytes, float]]] = {}  # NAME -> key -> (bytes, when written)
_LOCK = threading.Lock()


class MemObjects:
    """Keys in a dict of this process; implements farm.store.base.Objects."""

    kind = "mem"
    parallel = 1

    def __init__(self, url: str):
        name = url.removeprefix("mem://").strip("/")
        if not url.startswith("mem://") or not name:
            raise StoreError(f"{url!r}: an in-memory store is mem://NAME")
        self.location = f"mem://{name}"
        with _LOCK:
            self.space = _SPACES.setdefault(name, {})

    def url(self, key: str) -> str:
        return f"{self.location}/{key}"

    def file(self, key: str) -> Path | None:
        return None

    def get_tagged(self, key: str) -> tuple[bytes, str]:
        try:
            data = self.space[key][0]
        except KeyError:
            raise FileNotFoundError(self.url(key)) from None
        return data, hashlib.sha256(data).hexdigest()

    def get(self, key: str) -> bytes:
        return self.get_tagged(key)[0]

    def put(self, key: str, data: bytes) -> None:
        self.space[key] = (bytes(data), time.time())

    def put_if_absent(self, key: str, data: bytes) -> bool:
        return self.swap(key, data, None) is not None

    def swap(self, key: str, data: bytes, tag: str | None) -> str | None:
        with _LOCK:
            old = self.space.get(key)
            if (hashlib.sha256(old[0]).hexdigest() if old else None) != tag:
                return None
            self.put(key, data)
        return hashlib.sha256(data).hexdigest()

    def list(self, prefix: str, deep: bool = True) -> list[str]:
        names = [k[len(prefix):] for k in list(self.space) if k.startswith(prefix)]
        return sorted(n for n in names if deep or "/" not in n)

    def delete(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.space.pop(key, None)

    def head(self, key: str) -> float | None:
        entry = self.space.get(key)
        return entry[1] if entry else None


def open_mem(url: str) -> Store:
    return Store(MemObjects(url))
