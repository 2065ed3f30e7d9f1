"""The one atomic file write (temporary file in the same folder, then rename), for every writer
of ours: PNG frames, MDX and MDL models here, and everything the farm stores (farm.files)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

__all__ = ["atomic_write"]


def atomic_write(path: str | Path, data: bytes, tmp_dir: str | Path | None = None) -> None:
    """Write `data` to `path` through a temporary file in `tmp_dir` (default: path's folder, which must
    be on the same file system), renamed into place: a reader never sees half a file and a process
    killed mid-write leaves at most a stray ``.NAME.PID.XXXX.tmp``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tmp_dir) if tmp_dir is not None else path.parent
    tmp_dir.mkdir(parents=True, exist_ok=True)
    tmp = tmp_dir / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "wb") as f:  # no fsync: the rename is what readers rely on; a lost frame re-renders
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:  # name the file the caller asked for, not the temporary one
        tmp.unlink(missing_ok=True)
        raise type(e)(e.errno, e.strerror, str(path)) from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
