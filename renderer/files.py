"""The one atomic file write (temporary file in the same folder, then rename), for every writer
of ours: PNG frames, MDX and MDL models here, and everything the farm stores (farm.files).

Only a regular file (or a name not taken yet) is replaced. A name that leads to something else is
written into, as `cp` and Pillow do: a device or a FIFO (`-o /dev/stdout`, `-o >(viewer)`, a named
pipe) gets the bytes straight, since renaming a file over it would destroy it (`-o /dev/full` used
to leave a PNG file where the device was) and a stream has no half-written state to protect. A
symbolic link keeps being a link: the file it points to is replaced. A folder is refused.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import uuid
from pathlib import Path

__all__ = ["atomic_write", "is_stream"]

# Names of open file descriptors: written into, never resolved and renamed over (`-o /dev/stdout`
# with stdout redirected to a file must write that open file, not replace the file behind it).
_DESCRIPTOR = re.compile(r"/dev/(stdout|stderr|fd/\d+)|/proc/(self|thread-self|\d+)/fd/\d+")


def atomic_write(path: str | Path, data, tmp_dir: str | Path | None = None) -> None:
    """Write `data` (bytes, or an iterable of bytes chunks for a document too large to hold whole) to
    `path` through a temporary file in `tmp_dir` (default: path's folder, which must be on the same
    file system), renamed into place: a reader never sees half a file and a process killed mid-write
    leaves at most a stray ``.NAME.PID.XXXX.tmp`` (NAME cut to 40 characters). A device or FIFO is
    written into, a link's file is replaced (module docstring); OSErrors name `path`."""
    chunks = (data,) if isinstance(data, bytes | bytearray | memoryview) else data
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    mode = _mode(path)  # through links: the target's
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder; name a file to write", str(path))
    if _streaming(path, mode):
        _write_into(path, chunks)
        return
    if target != path:
        tmp_dir = None  # the link's file may be on another file system than tmp_dir
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tmp_dir) if tmp_dir is not None else target.parent
    tmp_dir.mkdir(parents=True, exist_ok=True)
    # At most 40 characters of the name (160 bytes): a name near NAME_MAX still gets a temporary file.
    tmp = tmp_dir / f".{target.name[:40]}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "wb", buffering=1 << 20) as f:  # no fsync: the rename is what readers rely on
            for chunk in chunks:
                f.write(chunk)
        os.replace(tmp, target)
    except OSError as e:  # name the file the caller asked for, not the temporary one
        tmp.unlink(missing_ok=True)
        raise type(e)(e.errno, e.strerror, str(path)) from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _mode(path: str | Path) -> int | None:
    try:
        return os.stat(path).st_mode
    except OSError:
        return None  # not there yet (or unreachable: the write names the problem)


def is_stream(path: str | Path) -> bool:
    """Whether `path` is written into rather than replaced: it leads (through links) to a device, a
    FIFO or a socket, or names an open file descriptor (/dev/stdout, /dev/fd/N, /proc/self/fd/N)."""
    return _streaming(path, _mode(path))


def _streaming(path: str | Path, mode: int | None) -> bool:
    return ((mode is not None and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode))
            or bool(_DESCRIPTOR.fullmatch(os.path.abspath(path))))


def _write_into(path: Path, chunks) -> None:
    """Write into what `path` opens (a device, a FIFO: blocks until it has a reader, as `cp` does)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:  # unbuffered: a full device fails here, at the write that did not fit
                    view = view[os.write(fd, view):]
        finally:
            os.close(fd)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, str(path)) from e
