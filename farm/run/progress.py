"""Progress of a job in frames: a tqdm bar (frames done, failed, rate, time left) fed by batches.

Runners report absolute counts per batch (`update(batch, done, failed)` while it runs, `finish`
when its result is in), because that is what both sources give: the local pool's children send
them through a queue, Celery tasks publish them as their PROGRESS state. A batch that is
delivered again starts counting from zero; the bar never moves backwards.
"""

from __future__ import annotations

import sys
import threading

__all__ = ["Progress"]


class Progress:
    def __init__(self, total: int, enabled: bool | None = None, desc: str = "frames", file=None):
        self.total = int(total)
        self._lock = threading.Lock()
        self._running: dict[str, tuple[int, int]] = {}
        self._finished: dict[str, tuple[int, int]] = {}
        self._shown = 0
        self._bar = None
        if enabled is None:
            enabled = (file or sys.stderr).isatty()
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=desc, unit="frame", file=file or sys.stderr, dynamic_ncols=True,
                             smoothing=0.1, postfix={"failed": 0})

    @property
    def done(self) -> int:
        with self._lock:
            return self._count(0)

    @property
    def failed(self) -> int:
        with self._lock:
            return self._count(1)

    def _count(self, i: int) -> int:
        return sum(v[i] for v in self._finished.values()) + sum(v[i] for v in self._running.values())

    def update(self, batch: str, done: int, failed: int = 0) -> None:
        """`done` frames of `batch` are finished so far (`failed` of them failed)."""
        with self._lock:
            if batch in self._finished:
                return
            self._running[batch] = (int(done), int(failed))
            self._refresh()

    def finish(self, batch: str, done: int, failed: int = 0) -> None:
        with self._lock:
            self._running.pop(batch, None)
            self._finished[batch] = (int(done), int(failed))
            self._refresh()

    def _refresh(self) -> None:
        n = min(self._count(0), self.total)
        if self._bar is None:
            self._shown = max(self._shown, n)
            return
        if n > self._shown:
            self._bar.update(n - self._shown)
            self._shown = n
        failed = sum(v[1] for v in self._finished.values()) + sum(v[1] for v in self._running.values())
        self._bar.set_postfix(failed=failed, refresh=False)
        self._bar.refresh()

    def write(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text)
        else:
            print(text, file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
