"""`-q`: errors only, for every command, whatever prints what.

Commands print summaries, notes, hints and warnings with plain `print` to stdout or stderr, and the
farm's loggers print warnings; rather than ask every one of them to look at a flag, `errors_only()`
is in force while a `-q` command runs: stdout goes nowhere (but `--json`, the output a script asked
for, and the exit status), and stderr passes only the lines that say they are errors (``error: ...``
from the CLI's error guard, ``ERROR ...`` from a logger). Lines are passed or dropped whole.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

__all__ = ["errors_only"]


class _ErrorLines(io.TextIOBase):
    """A text stream that forwards to `target` only the lines that start with "error" (any case)."""

    def __init__(self, target):
        self.target = target
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            if line.lstrip().lower().startswith("error"):
                self.target.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def close_partial(self) -> None:
        if self._partial:
            self.write("\n")


@contextlib.contextmanager
def errors_only(keep_stdout: bool = False):
    """While in force: stdout dropped (kept when `keep_stdout`, e.g. for --json), stderr errors only."""
    out, err = sys.stdout, sys.stderr
    filtered = _ErrorLines(err)
    devnull = None if keep_stdout else open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    sys.stderr = filtered
    if devnull is not None:
        sys.stdout = devnull
    try:
        yield
    finally:
        filtered.close_partial()
        sys.stdout, sys.stderr = out, err
        if devnull is not None:
            devnull.close()
