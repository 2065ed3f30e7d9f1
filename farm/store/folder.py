"""The folder store: a folder every worker can reach (local disk, NFS, a shared volume). Its
primitives (farm.store.base.Objects) are files; what they hold is farm.store.domain's.

    OUT/
      images/ab/<sha256>.png      frames, named by the sha256 of their PNG bytes
      images/ab/<sha256>.json     sidecar: the trace (incl. the GL environment) and diagnostics
      inputs/ab/<sha256>          a job's travelling inputs (farm.run.inputs), named by their sha256
      jobs/<job>.json             job state (farm.run.jobs): per-trace status, written by `farm run`
      jobs/<job>/index.json       trace key -> image digest, for the traces that rendered
      jobs/<job>/log.jsonl        the job state's changes, a JSON line each (append-only; farm.run.jobs)
      jobs/<job>/batches/<id>.json  each batch's result, written by the worker that rendered it
      jobs/<job>/attempts/<id>    "x HOST PID" per delivery of a batch, "e HOST PID" when it ended
      jobs/<job>/batches.lock     held (flock) while a batch result is compared and swapped
      jobs/<job>/<name>           artefacts: comparison.json, heatmaps/, diff-<job>.json
      tmp/                        temporary files (same file system, so renames are atomic)

Every file but the append-only ones (log.jsonl, attempts/) is written to tmp/ and renamed into
place, so a reader never sees half a file and a process killed mid-write leaves nothing but a
stray file in tmp/; a job log line is whole or absent (farm.files.append_json_line). Names are
content hashes and the bytes of a frame are a pure function of its trace, so a batch that runs
twice (a redelivered Celery message, a retry) writes the same files again: there are no
duplicates to clean up. The sidecar and the batch result hold nothing that varies between runs
(no times, hosts or pids).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from farm.files import atomic_write
from farm.store.domain import Store

__all__ = ["FolderObjects", "FolderStore"]


class FolderObjects:
    """Keys as files under a folder; implements farm.store.base.Objects."""

    kind = "folder"
    parallel = 1  # a local folder gains nothing from overlapping writes
    streams = True  # put takes an iterable of bytes chunks too (atomic_write), so nothing is held whole

    def __init__(self, root: str | Path):
        self.root = Path(root).absolute()
        self.tmp = self.root / "tmp"
        self._real: Path | None = None
        self._inside: dict[Path, bool] = {}  # folder -> whether it is inside the root, resolved once

    @property
    def location(self) -> str:
        return str(self.root)

    def path(self, key: str) -> Path:
        return self.root / key

    def file(self, key: str) -> Path | None:
        """The file behind `key` (None when it would leave the folder, through a link or ".."). Its
        folder is resolved once (a delivery's events, a batch's result: thousands of keys in a few
        folders); the file itself is resolved only when it is a link."""
        p = self.root / key
        inside = self._inside.get(p.parent)
        if inside is None:
            inside = self._resolves_inside(p.parent)
            if p.parent.is_dir():  # one not made yet is resolved again (it may be made a link)
                self._inside[p.parent] = inside
        if inside and p.is_symlink():
            inside = self._resolves_inside(p)
        return p if inside else None

    def _resolves_inside(self, p: Path) -> bool:
        try:
            return p.resolve().is_relative_to(self._real_root())
        except OSError:
            return False

    def _real_root(self) -> Path:
        # resolved once per store, not once per file (a report of 100k traces asks for every image)
        if self._real is None:
            self._real = self.root.resolve()
        return self._real

    def url(self, key: str) -> str:
        return str(self.root / key)

    def get(self, key: str) -> bytes:
        return (self.root / key).read_bytes()

    def get_tagged(self, key: str) -> tuple[bytes, str]:
        data = self.get(key)
        return data, hashlib.sha256(data).hexdigest()

    def put(self, key: str, data) -> None:
        atomic_write(self.root / key, data, self.tmp)  # bytes or chunks  # a temporary file renamed into place

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write unless the file is there at its length (a content-addressed name: these bytes)."""
        path = self.root / key
        if path.is_file() and path.stat().st_size == len(data):
            return False
        atomic_write(path, data, self.tmp)
        return True

    def swap(self, key: str, data: bytes, tag: str | None) -> str | None:
        """Compare-and-swap under a lock on the key's folder (<folder>.lock; flock, which NFS clients
        emulate with POSIX locks): the new file is renamed into place only while it still has `tag`."""
        path = self.root / key
        with self._locked(path.parent.with_name(path.parent.name + ".lock")):
            try:
                now = hashlib.sha256(path.read_bytes()).hexdigest()
            except FileNotFoundError:
                now = None
            if now != tag:
                return None
            atomic_write(path, data, self.tmp)
        return hashlib.sha256(data).hexdigest()

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def list(self, prefix: str, deep: bool = True) -> list[str]:
        """The files under `prefix` (links to files too; `deep`: in its folders too, not through links
        to folders), relative to it, sorted. Plain strings: a job's thousands of delivery files."""
        base = os.path.join(self.root, prefix)
        if not os.path.isdir(base):
            return []
        found = []
        for folder, _, names in os.walk(base) if deep else [(base, None, os.listdir(base))]:
            rel = os.path.relpath(folder, base)
            found.extend(name if rel == "." else f"{rel}/{name}" for name in names
                         if os.path.isfile(os.path.join(folder, name)))
        return sorted(found)

    def delete(self, keys: Iterable[str]) -> None:
        """Remove the files, then the folders they leave empty (up to the store's root)."""
        root = str(self.root)
        parents = set()
        for key in keys:
            path = os.path.join(root, key)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            parents.add(os.path.dirname(path))
        folders: set[Path] = set()
        for p in map(Path, parents):  # each folder once, however many files it held
            while p != self.root and p not in folders and p.is_relative_to(self.root):
                folders.add(p)
                p = p.parent
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()

    def head(self, key: str) -> float | None:
        try:
            return (self.root / key).stat().st_mtime
        except OSError:
            return None


class FolderStore(Store):
    """The store as a folder (see the module docstring), with its files' paths for whoever looks."""

    def __init__(self, root: str | Path):
        super().__init__(FolderObjects(root))

    @property
    def root(self) -> Path:
        return self.objects.root

    @property
    def tmp(self) -> Path:
        return self.objects.tmp

    def image_path(self, digest: str) -> Path:
        return self.root / self.image_ref(digest)

    def sidecar_path(self, digest: str) -> Path:
        return self.root / self.sidecar_ref(digest)

    def job_path(self, job_id: str) -> Path:
        return self.root / self.job_ref(job_id)

    def job_dir(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    def index_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "index.json"

    def job_log_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "log.jsonl"

    def batch_result_path(self, job_id: str, batch_id: str) -> Path:
        return self.root / self.batch_ref(job_id, batch_id)

    def attempts_path(self, job_id: str, batch_id: str) -> Path:
        return self.job_dir(job_id) / "attempts" / batch_id

    def images(self) -> list[Path]:
        return sorted((self.root / "images").glob("*/*.png"))
