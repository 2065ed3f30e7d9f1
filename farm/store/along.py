"""Frames recorded along the way: a worker merges each frame into its batch's stored result as soon
as the frame's image is stored (farm.run.execute), so a hard time limit or a killed process loses
no frame that a write already carried. Where a request is cheap (a local folder: `parallel` 1) each
frame is its own merge, at once. Where requests cross a network (`parallel` > 1) the merges go in
the background, coalesced: one write per batch in flight at a time, and the frames that arrive
while it is in flight go together in the next one. A frame's record therefore waits at most one
write behind its image (never ahead of it: a write first waits for the images then in flight), and
a batch of 48 instant frames costs a few writes instead of 48 read-merge-writes.

`Along.add(job_id, result)` queues a partial result (a few frames); `Along.settle(job_id, batch_id)`
waits for the batch's write in flight and hands back what is still queued, for the next write of
that batch (`Store.write_batch_result`) to carry with its own frames.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future

__all__ = ["Along"]

log = logging.getLogger("farm.store")


class Along:
    """The background, coalesced merges of one store (see the module docstring). `write(job_id,
    result)` merges a partial result into the stored one; `submit(fn)` runs fn in the store's pool."""

    def __init__(self, write: Callable[[str, dict], object], submit: Callable[[Callable[[], None]], Future]):
        self._write, self._submit = write, submit
        self._forked()

    def _forked(self) -> None:
        """This process's state (a forked child starts without its parent's writes in flight)."""
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._queued: dict[tuple[str, str], list[dict]] = {}  # (job, batch) -> frames not yet written
        self._running: dict[tuple[str, str], Future] = {}  # (job, batch) -> its write in flight

    def add(self, job_id: str, result: dict) -> None:
        if self._pid != os.getpid():
            self._forked()
        key = (job_id, result["batch"])
        with self._lock:
            self._queued.setdefault(key, []).extend(result.get("frames", ()))
            if key not in self._running:
                self._running[key] = self._submit(lambda: self._drain(key))

    def _drain(self, key: tuple[str, str]) -> None:
        """Write what is queued for a batch, again while more arrived meanwhile; then stop."""
        while True:
            with self._lock:
                frames = self._queued.pop(key, None)
                if not frames:
                    self._running.pop(key, None)
                    return
            try:
                self._write(key[0], {"batch": key[1], "frames": frames})
            except Exception as e:  # noqa: BLE001 - the batch's final write says so, or carries these frames
                log.debug("recording frames of batch %s along the way: %s", key[1], e)

    def settle(self, job_id: str, batch_id: str) -> list[dict]:
        """Take the frames still queued for a batch (for the caller's write to carry) and wait for its
        write in flight."""
        if self._pid != os.getpid():
            self._forked()
        key = (job_id, batch_id)
        with self._lock:
            queued = self._queued.pop(key, [])
            running = self._running.get(key)
        if running is not None:
            running.exception()  # waits (_drain raises nothing)
        return queued
