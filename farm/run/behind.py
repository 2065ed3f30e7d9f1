"""A batch's work on each rendered frame (encoding, storing: `BatchKind.keep`) in one background
thread, so that the render thread poses and issues the next frames meanwhile (issue 37 item 1):
numpy, deflate (ISA-L, zlib) and file writes release the GIL.

    behind = Behind()                # depth KEEP_BEHIND; Behind(0) runs each call at once, here
    behind.put(tag, fn, *args)
    while (due := behind.due()) is not None:   # oldest first, while more than the depth wait
        due.tag, due.result              # fn's return value, or its exception raised here
        behind.pop()
    behind.due(everything=True) ...      # the rest, in order
    behind.close()

Calls run one at a time in the order they were put, so a kind may keep state across its frames
(an animation's frames). Memory is bounded: at most `depth` frames wait (their pixels held) while
the render thread goes on; `put` waits for the oldest beyond that.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

KEEP_BEHIND = 2  # frames whose keep may wait or run while the render thread goes on


@dataclass
class Due:
    """A call that is due: its tag, and `result` (its return value, or its exception raised);
    `ended`: time.perf_counter() when it returned."""

    tag: object
    future: Future
    ended: float = 0.0

    @property
    def result(self):
        value, self.ended = self.future.result()
        return value


class Behind:
    def __init__(self, depth: int = KEEP_BEHIND):
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        self.depth = depth
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="farm-keep") if depth else None
        self._pending: deque[Due] = deque()

    def put(self, tag, fn: Callable, *args) -> None:
        """Queue `fn(*args)` (with depth 0: call it now; its exception is raised by `Due.result`)."""
        if self._pool is None:
            future: Future = Future()
            try:
                future.set_result(_timed(fn, *args))
            except BaseException as e:  # noqa: BLE001 - raised where the caller reads the result (a time limit too)
                future.set_exception(e)
        else:
            future = self._pool.submit(_timed, fn, *args)
        self._pending.append(Due(tag, future))

    def due(self, everything: bool = False) -> Due | None:
        """The oldest entry when more than `depth` are pending (with `everything`: when any is), else
        None. It stays pending until `pop`: a caller interrupted while reading its result finds it again."""
        if len(self._pending) > (0 if everything else self.depth):
            return self._pending[0]
        return None

    def pop(self) -> None:
        """The oldest entry is taken."""
        self._pending.popleft()

    def __len__(self) -> int:
        return len(self._pending)

    def close(self) -> None:
        """Wait for the call running now, drop those not started (a batch that stops)."""
        self._pending.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _timed(fn: Callable, *args):
    value = fn(*args)
    return value, time.perf_counter()
