"""Progress of a job in frames, and the farm's logging setup.

`Progress` is fed by batches: runners report absolute counts per batch (`update(batch, done,
failed)` while it runs, `finish` when its result is in), because that is what both sources give:
the local pool's children send them through a queue, Celery tasks publish them as their PROGRESS
state. A batch that is delivered again starts counting from zero; the count never moves backwards.

How it shows: on a terminal, a tqdm bar (frames done, failed, rate, time left). When the output
is not a terminal (CI logs), one plain line every `every` seconds (FARM_PROGRESS_EVERY, default
10) and one at the end::

    progress: 120/500 frames (24%), 3 failed, 11.8 frames/s, ETA 32s

`enabled=False` (--no-progress, -q) shows nothing; True forces the bar.

Logging: `configure_logging(verbose, quiet)` (the CLI's -v/-q) sets the ``farm`` loggers' level
(WARNING by default, -v INFO, -vv DEBUG, -q ERROR) and a handler on stderr whose `OnceFilter`
lets each distinct warning through once per process.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

from farm.environment import env_int

__all__ = ["OnceFilter", "Progress", "configure_logging", "progress_line"]


def progress_line(done: int, failed: int, total: int, elapsed: float) -> str:
    """One progress line for logs: done of total, failed, rate, ETA."""
    rate = done / elapsed if elapsed > 0 else 0.0
    pct = f" ({100 * done // total}%)" if total else ""
    if done >= total:
        eta = "done"
    elif rate > 0:
        eta = f"ETA {_duration((total - done) / rate)}"
    else:
        eta = "ETA unknown"
    return f"progress: {done}/{total} frames{pct}, {failed} failed, {rate:.1f} frames/s, {eta}"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    def __init__(self, total: int, enabled: bool | None = None, desc: str = "frames", file=None,
                 every: float | None = None):
        self.total = int(total)
        self._lock = threading.Lock()
        self._running: dict[str, tuple[int, int]] = {}
        self._finished: dict[str, tuple[int, int]] = {}
        self._finished_sum = [0, 0]  # done, failed over _finished: an update costs O(running), not O(finished)
        self._shown = 0
        self._bar = None
        self._file = file or sys.stderr
        self._lines = False
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self.every = float(every if every is not None else env_int("FARM_PROGRESS_EVERY"))
        tty = _isatty(self._file)
        if enabled is None:
            enabled = True
            self._lines = not tty
        if enabled and not self._lines:
            from tqdm import tqdm  # only on a terminal: the bar

            self._bar = tqdm(total=self.total, desc=desc, unit="frame", file=self._file, dynamic_ncols=True,
                             smoothing=0.1, postfix={"failed": 0})
        if self._lines:
            self._ticker = threading.Thread(target=self._tick, name="farm-progress", daemon=True)
            self._ticker.start()

    @property
    def done(self) -> int:
        with self._lock:
            return self._count(0)

    @property
    def failed(self) -> int:
        with self._lock:
            return self._count(1)

    def _count(self, i: int) -> int:
        return self._finished_sum[i] + sum(v[i] for v in self._running.values())

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
            old = self._finished.get(batch, (0, 0))
            self._finished[batch] = (int(done), int(failed))
            self._finished_sum[0] += int(done) - old[0]
            self._finished_sum[1] += int(failed) - old[1]
            self._refresh()

    def _refresh(self) -> None:
        n = min(self._count(0), self.total)
        if self._bar is None:
            self._shown = max(self._shown, n)
            return
        if n > self._shown:
            self._bar.update(n - self._shown)
            self._shown = n
        self._bar.set_postfix(failed=self._count(1), refresh=False)
        self._bar.refresh()

    # --- plain lines (not a terminal)
    def line(self) -> str:
        with self._lock:
            done, failed = max(self._shown, min(self._count(0), self.total)), self._count(1)
        return progress_line(done, failed, self.total, time.monotonic() - self._t0)

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            self._print(self.line())

    def _print(self, text: str) -> None:
        try:
            print(text, file=self._file, flush=True)
        except (OSError, ValueError):  # the log went away: progress is not worth failing for
            pass

    def write(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text)
        else:
            print(text, file=self._file)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join(5)
            self._ticker = None
            self._print(self.line())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _isatty(f) -> bool:
    try:
        return bool(f.isatty())
    except (AttributeError, ValueError):
        return False


class OnceFilter(logging.Filter):
    """Lets each distinct warning (logger, level, message) through once; other records always."""

    def __init__(self):
        super().__init__()
        self._seen: set[tuple[str, int, str]] = set()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, record.getMessage())
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
        return True


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a record comes (it may be replaced after set-up)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


_HANDLER: logging.Handler | None = None


def configure_logging(verbose: int = 0, quiet: bool = False, stream=None) -> logging.Logger:
    """The ``farm`` loggers for a command: WARNING (default), INFO (-v), DEBUG (-vv), ERROR (-q);
    one stderr handler (replaced on a second call) with `OnceFilter`."""
    global _HANDLER
    level = logging.ERROR if quiet else (logging.WARNING, logging.INFO)[min(verbose, 1)] if verbose < 2 \
        else logging.DEBUG
    root = logging.getLogger("farm")
    if _HANDLER is not None:
        root.removeHandler(_HANDLER)
    _HANDLER = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    _HANDLER.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    _HANDLER.addFilter(OnceFilter())
    root.addHandler(_HANDLER)
    root.setLevel(level)
    root.propagate = False
    return root
