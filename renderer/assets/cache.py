"""Decoded images keyed by the sha256 of their file's bytes (and the decoder), per process,
bounded in bytes: hundreds of models sharing `Textures\\X.blp` decode it once, wherever each found
it (a folder, a map, a game archive). Images are returned read-only.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

DEFAULT_MAX_BYTES = 512 * 1024 * 1024


class DecodeCache:
    """Least-recently-used decoded images, at most `max_bytes` of pixels in all."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_bytes = int(max_bytes)
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, digest: str, data: bytes, name: str, decode: Callable[[bytes, str], np.ndarray],
            decoder: str = "texture") -> np.ndarray:
        """The decoded image of `data` (whose sha256 is `digest`), decoding it only when not cached.
        Errors of `decode` propagate and nothing is cached."""
        key = (decoder, digest)
        with self._lock:
            img = self._items.get(key)
            if img is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return img
        img = decode(data, name)
        img.setflags(write=False)
        with self._lock:
            self.misses += 1
            if key not in self._items and img.nbytes <= self.max_bytes:
                self._items[key] = img
                self._bytes += img.nbytes
                while self._bytes > self.max_bytes:
                    self._bytes -= self._items.popitem(last=False)[1].nbytes
        return img

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
            self.hits = self.misses = 0


def _max_bytes_from_env() -> int:
    """DECODE_CACHE_MB in the environment (0: no cache, for measuring what it saves), else the default."""
    raw = os.environ.get("DECODE_CACHE_MB", "").strip()
    return int(raw) * 1024 * 1024 if raw.isdigit() else DEFAULT_MAX_BYTES


DECODED = DecodeCache(_max_bytes_from_env())
