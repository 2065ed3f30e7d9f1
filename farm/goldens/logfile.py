"""The decision log file (approvals.jsonl): one JSON record a line, each line whole or absent.

A record is appended with one `write` of the whole line to the file opened O_APPEND, then
fsync'd, and the count written is checked; when the write or the fsync fails (a full disk), the
file is cut back to its old length. A last line without its newline (a torn append: a crash or a
full disk in the middle of a write, e.g. by an older modelfarm) is ignored with a warning naming
the file and the byte offset, and cut off by the next append; a line before it that is not a JSON
object is an error naming the file and the line. Which records took effect (the index saved what
they changed) is farm.goldens.index's business (`GoldenIndex.log`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LogFile", "append_line", "cut_back", "read_log"]

log = logging.getLogger("farm.goldens")


@dataclass
class LogFile:
    """What a log file holds: its records, where each record's line starts (a byte offset), and
    `keep`, the length of its whole lines (a torn last line starts there)."""

    path: Path
    records: list[dict] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    keep: int = 0


def read_log(path: str | Path, error=ValueError) -> LogFile:
    """The records of log file `path` (none when it does not exist); a bad line raises `error`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return LogFile(path)
    keep = data.rfind(b"\n") + 1
    if keep < len(data):
        log.warning("%s: the last line, from byte offset %d (%d bytes, no newline), was never finished (a write"
                    " cut short); it is ignored and cut off at the next decision", path, keep, len(data) - keep)
    out = LogFile(path, keep=keep)
    offset = 0
    for no, line in enumerate(data[:keep].split(b"\n")[:-1], 1):
        start, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        try:
            rec = json.loads(line.decode("utf-8"))
        except ValueError as e:  # UnicodeDecodeError is a ValueError too
            raise error(f"{path}:{no}: not valid JSON ({e}); fix or remove that line (byte offset {start})") from None
        if not isinstance(rec, dict):
            raise error(f"{path}:{no}: expected a JSON object (a decision record), got {type(rec).__name__}")
        out.records.append(rec)
        out.offsets.append(start)
    return out


def append_line(path: str | Path, record: dict, keep: int) -> int:
    """Append `record` as one line to `path`, first cutting the file back to `keep` bytes when it
    is longer (a torn tail, or a record that never took effect). Returns the length before the
    append (to cut back to when what must follow it fails). An OSError names `path`."""
    path = Path(path)
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, str(path)) from e
    try:
        size = os.fstat(fd).st_size
        if keep < size:
            os.ftruncate(fd, keep)
            size = keep
        try:
            done = os.write(fd, line)
            while done < len(line):  # a short write: the disk filled part way; the next one says why
                n = os.write(fd, line[done:])
                if n <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                done += n
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    except OSError as e:
        raise type(e)(e.errno, e.strerror, str(path)) from e
    finally:
        os.close(fd)
    return size


def cut_back(path: str | Path, size: int) -> None:
    """Cut log file `path` back to `size` bytes (best effort: a reader ignores a record that did not
    take effect anyway)."""
    with contextlib.suppress(OSError):
        os.truncate(path, size)
