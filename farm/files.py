"""File primitives every layer of the farm shares: the atomic write, JSON bytes, a file's sha256,
JSON-lines logs (one record a line, each line whole or absent).

`atomic_write` (renderer.files owns it; re-exported here) writes to a temporary file on the same
file system and renames it into place, so a reader never sees half a file. `json_bytes` is the one
JSON layout of every document we write (sorted keys, one space indent, UTF-8, final newline), so
the same data always gives the same bytes.

`append_json_line` appends one record as one line with a single O_APPEND write (`append_line`, for
any line; the golden decision log uses it too); a write cut short (a full disk) cuts the file back
to its old length and raises, and a torn last line an earlier append left (a process killed
mid-write) is cut off before the next one. `LineAppender` appends many lines to one file the
same way with the file kept open (one write a line, not an open and a close). `read_json_lines`
gives the records back, leaving out (with a warning) a torn last line.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from renderer.files import atomic_write

__all__ = ["LineAppender", "append_json_line", "append_line", "atomic_write", "atomic_write_json", "encoded",
           "file_digest", "json_bytes", "json_line", "json_mapping_chunks", "json_wide_bytes", "json_wide_chunks",
           "json_wide_encoded", "read_json_lines", "read_json_lines_at", "read_wide_json", "write_chunks"]

log = logging.getLogger("farm.files")


def json_bytes(obj) -> bytes:
    # "backslashreplace": a name from bytes that are not UTF-8 (os.fsdecode's lone surrogates) is
    # written as its JSON escape (\udcb0), which reads back as the same string; other text as before.
    return (json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")


def atomic_write_json(path: str | Path, obj, tmp_dir: str | Path | None = None) -> None:
    atomic_write(path, json_bytes(obj), tmp_dir)


def json_wide_chunks(obj: dict, wide: str | tuple[str, ...]):
    """`obj` as JSON in pieces, for a document with large members `wide` (a name or several: mappings,
    such as a comparison's traces, a job's traces and batches; or lists: a thumbnail index's models):
    the other members first, by name, then the large ones in the order given; each top-level member on
    a line, each entry of a large one on a line of its own (compact, by the C encoder; a mapping with a
    `json_lines()` of its own, such as farm.plan.traces.TraceTable, writes them), so the same data
    gives the same bytes and a million entries are never one string. ensure_ascii is off as in
    json_bytes."""
    dumps = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode
    wide = (wide,) if isinstance(wide, str) else tuple(wide)
    names = sorted(n for n in obj if n not in wide) + [n for n in wide if n in obj]  # the large ones last
    yield "{\n"
    for i, name in enumerate(names):
        end = ",\n" if i < len(names) - 1 else "\n"
        member = obj[name]
        if name in wide and isinstance(member, Mapping):
            lines = member.json_lines() if hasattr(member, "json_lines") else \
                (f"{dumps(k)}: {dumps(v)}" for k, v in sorted(member.items()))
            yield f" {dumps(name)}: {{"
            yield from _entry_lines(lines)
            yield "}" + end
        elif name in wide and isinstance(member, list):
            yield f" {dumps(name)}: ["
            yield from _entry_lines(dumps(v) for v in member)
            yield "]" + end
        else:
            yield f" {dumps(name)}: {dumps(member)}{end}"
    yield "}\n"


def _entry_lines(lines):
    """A wide member's entries, one a line ("\n  entry", commas between, "\n " after the last)."""
    first = True
    for line in lines:
        yield ("\n  " if first else ",\n  ") + line
        first = False
    if not first:
        yield "\n "


def read_wide_json(read, wide: dict, block: int = 1 << 22) -> dict:
    """The document `json_wide_chunks` wrote, read through `read(n)` (a binary file's read) without
    holding its large members whole: `wide` maps each such member's name to `put(entries)`, which is
    given its entries as dicts of about `block` bytes of lines each (`put` None: the member's lines are
    passed over, not parsed); the document returned has ``{}`` there. ValueError when the bytes are
    not in that layout (an older, indented document: read it whole instead; `put` may have been given
    some entries already)."""
    openings = {b" " + json.dumps(name).encode() + b": {\n": put for name, put in wide.items()}
    rest: list[bytes] = []
    buf, pos, ended, inside, put, opening, starved = b"", 0, False, False, None, b"", False
    while True:
        if (starved or len(buf) - pos < block) and not ended:  # a block ahead, or more for a long line
            more = read(block)
            buf, pos, ended, starved = buf[pos:] + more, 0, not more, False
        if not inside:  # outside the wide members: a line at a time
            end = buf.find(b"\n", pos)
            if end < 0 and not ended:
                starved = True
                continue
            if end < 0:
                rest.append(buf[pos:])
                break
            line, pos = buf[pos:end + 1], end + 1
            inside = line in openings
            if inside:
                opening, put = line, openings[line]
            else:
                rest.append(line)
            continue
        if buf.startswith(b" }", pos):  # the line closing the member: where it starts, else -1
            close = pos
        else:
            close = buf.find(b"\n }", pos)
            close = close + 1 if close >= 0 else -1
        cut = close if close >= 0 else buf.rfind(b"\n", pos) + 1  # the entries before it, else whole lines
        if cut > pos:
            if put is not None:
                _put_entries(buf[pos:cut], put, opening)
            pos = cut
        if close < 0:
            if ended:
                raise ValueError(f"{opening!r} does not end")
            starved = cut <= pos
            continue
        end = buf.find(b"\n", pos)
        if end < 0 and not ended:
            starved = True
            continue
        if end < 0:
            raise ValueError(f"{opening!r} does not end")
        rest.append(opening[:-2] + b"{}" + buf[pos + 2:end + 1])
        pos, inside = end + 1, False
    return json.loads(b"".join(rest))


def _put_entries(lines: bytes, put, opening: bytes) -> None:
    """Entries of a wide member, one a line (``  "key": value,``), parsed as one object and given to `put`."""
    body = lines.rstrip()
    entries = json.loads(b"{" + body.removesuffix(b",") + b"}")
    if len(entries) != lines.count(b"\n"):
        raise ValueError(f"{opening!r} is not written one entry a line (or repeats a key)")
    put(entries)


def json_mapping_chunks(items):
    """A flat JSON object from sorted (key, value) pairs, one pair a line (compact values): an index of
    a million entries written in pieces."""
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    yield "{"
    yield from _entry_lines(f"{dumps(k)}: {dumps(v)}" for k, v in items)
    yield "}\n"


def encoded(chunks):
    """Text pieces as UTF-8 bytes pieces, a name from bytes that are not UTF-8 as its escape
    (json_bytes' "backslashreplace")."""
    return (chunk.encode("utf-8", "backslashreplace") for chunk in chunks)


def json_wide_bytes(obj: dict, wide: str) -> bytes:
    """`json_wide_chunks` as one document's bytes (an object store's PUT): about 7x faster to write
    than json_bytes' indented pure-Python encoding, and reads back the same."""
    return "".join(json_wide_chunks(obj, wide)).encode("utf-8", "backslashreplace")


def json_wide_encoded(obj: dict, wide: str | tuple[str, ...]):
    """`json_wide_chunks` as bytes chunks (the same bytes as json_wide_bytes, never held whole: a
    store that takes pieces writes them as they come, farm.store's put_artefact and write_job)."""
    return encoded(json_wide_chunks(obj, wide))


def write_chunks(path: str | Path, chunks) -> None:
    """Write the text of `chunks` (an iterable of str) to `path` as atomic_write does (a document too
    large to hold as one string); UTF-8, a name from bytes that are not UTF-8 as its escape
    (json_bytes' "backslashreplace")."""
    atomic_write(path, encoded(chunks))


def file_digest(path: str | Path) -> str:
    """sha256 (hex) of a file's bytes, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _whole_lines_end(fd: int, size: int) -> int:
    """Where the file's last whole line ends (0: none), reading back from `size` in 64 KiB steps."""
    end = size
    while end > 0:
        start = max(0, end - 65536)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            return start + at + 1
        end = start
    return 0


def json_line(record: dict) -> bytes:
    """`record` as one JSON line (compact, sorted keys, its newline included)."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    return text.encode("utf-8", "backslashreplace")  # a lone surrogate as its JSON escape


def append_json_line(path: str | Path, record: dict) -> None:
    """Append `record` (compact JSON, sorted keys) as one line to `path`: whole or absent. An
    OSError names `path`."""
    append_line(path, json_line(record))


class LineAppender:
    """`append_line` to one file, many times, by one writer (a caller holding the file's lock): the
    first line is append_line's (the folder made, a torn last line cut off), then the file stays open
    and each line is one O_APPEND write, whole or absent (a write cut short is cut back and raises).
    `close()` when done (before the file is removed or replaced)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._fd: int | None = None

    def append(self, line: bytes) -> None:
        if self._fd is None:
            append_line(self.path, line)
            try:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            except OSError as e:
                raise type(e)(e.errno, e.strerror, str(self.path)) from e
            return
        try:
            _write_whole(self._fd, line, os.fstat(self._fd).st_size)
        except OSError as e:
            raise type(e)(e.errno, e.strerror, str(self.path)) from e

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def append_line(path: str | Path, line: bytes, *, keep: int | None = None, sync: bool = False) -> int:
    """Append `line` (one line, its newline included) to `path` with one O_APPEND write: whole or
    absent. The file is first cut back to `keep` bytes when that is given and shorter (a caller
    dropping records of its own), else a torn last line is cut off. `sync`: fsync it before
    returning. Returns the file's length before the append (to cut back to when what must follow
    fails). An OSError names `path`."""
    path = Path(path)
    try:
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        except FileNotFoundError:  # its folder is not there yet (made only then: one call, not one a line)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, str(path)) from e
    try:
        size = os.fstat(fd).st_size
        if keep is not None and keep < size:
            size = keep
            os.ftruncate(fd, size)
        elif size and os.pread(fd, 1, size - 1) != b"\n":  # a torn line: cut it off
            size = _whole_lines_end(fd, size)
            os.ftruncate(fd, size)
        _write_whole(fd, line, size, sync)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, str(path)) from e
    finally:
        os.close(fd)
    return size


def _write_whole(fd: int, line: bytes, size: int, sync: bool = False) -> None:
    """One O_APPEND write of `line` to `fd` (then fsync when `sync`); a write cut short or failing
    cuts the file back to `size`, its length before, and raises."""
    try:
        if os.write(fd, line) != len(line):  # cut short: the disk filled part way
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if sync:
            os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise


def read_json_lines(path: str | Path) -> list[dict]:
    """The records of a JSON-lines file (none when it does not exist). A last line that is torn (no
    newline, or not JSON: a write cut short) is left out with a warning; any other line that is not
    a JSON object raises ValueError naming the file, the line and its byte offset."""
    return [rec for _, rec in read_json_lines_at(path)]


def read_json_lines_at(path: str | Path) -> list[tuple[int, dict]]:
    """`read_json_lines`, each record with the byte offset its line starts at."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    records: list[tuple[int, dict]] = []
    offset = 0
    for no, line in enumerate(lines, 1):
        start, offset = offset, offset + len(line) + 1
        if not line.strip():
            continue
        last = no == len(lines) or (no == len(lines) - 1 and not lines[-1])
        try:
            rec = json.loads(line.decode("utf-8"))
        except ValueError as e:  # UnicodeDecodeError is a ValueError too
            if last:
                log.warning("%s: the last line (byte offset %d, %d bytes) is torn (a write cut short); it is left"
                            " out", path, start, len(line))
                continue
            raise ValueError(f"{path}:{no}: not valid JSON ({e}) at byte offset {start}") from None
        if not isinstance(rec, dict):
            raise ValueError(f"{path}:{no}: expected a JSON object, got {type(rec).__name__}")
        if no == len(lines):  # parses, but its newline never made it: the write was cut short
            log.warning("%s: the last line (byte offset %d) has no newline (a write cut short); it is left out",
                        path, start)
            continue
        records.append((start, rec))
    return records
