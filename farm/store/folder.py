"""The folder store: a folder every worker can reach (local disk, NFS, a shared volume).

    OUT/
      images/ab/<sha256>.png      frames, named by the sha256 of their PNG bytes
      images/ab/<sha256>.json     sidecar: the trace (incl. the GL environment) and diagnostics
      inputs/ab/<sha256>          a job's travelling inputs (farm.run.inputs), named by their sha256
      jobs/<job>.json             job state (farm.run.jobs): per-trace status, written by `farm run`
      jobs/<job>/index.json       trace key -> image digest, for the traces that rendered
      jobs/<job>/log.jsonl        the job state's changes, a JSON line each (append-only; farm.run.jobs)
      jobs/<job>/batches/<id>.json  each batch's result, written by the worker that rendered it
      jobs/<job>/attempts/<id>    "x HOST PID" per delivery of a batch, "e HOST PID" when it ended
      jobs/<job>/batches.lock     held (flock) while a batch result is merged and rewritten
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
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from farm.files import append_json_line, atomic_write, atomic_write_json, json_bytes, read_json_lines
from farm.store.base import checked_input, delivery_owner, input_ref, merge_batch_results, open_deliveries
from farm.store.documents import check_batch_result, check_job, read_document

__all__ = ["FolderStore"]


class FolderStore:
    """The store as a folder (see the module docstring); implements farm.store.base.Store."""

    kind = "folder"

    def __init__(self, root: str | Path):
        self.root = Path(root).absolute()

    @property
    def location(self) -> str:
        return str(self.root)

    def __repr__(self) -> str:
        return f"FolderStore({str(self.root)!r})"

    # --- layout
    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    def image_path(self, digest: str) -> Path:
        return self.root / "images" / digest[:2] / f"{digest}.png"

    def sidecar_path(self, digest: str) -> Path:
        return self.root / "images" / digest[:2] / f"{digest}.json"

    def job_path(self, job_id: str) -> Path:
        return self.root / "jobs" / f"{job_id}.json"

    def job_dir(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    def index_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "index.json"

    def job_log_path(self, job_id: str) -> Path:
        return self.job_dir(job_id) / "log.jsonl"

    def batch_result_path(self, job_id: str, batch_id: str) -> Path:
        return self.job_dir(job_id) / "batches" / f"{batch_id}.json"

    def attempts_path(self, job_id: str, batch_id: str) -> Path:
        return self.job_dir(job_id) / "attempts" / batch_id

    # --- images
    def put_image(self, png: bytes, meta: dict) -> str:
        """Store PNG bytes and their sidecar; returns the digest (sha256 hex of the bytes)."""
        digest = hashlib.sha256(png).hexdigest()
        sidecar = {"digest": digest, "bytes": len(png), **meta}
        path = self.image_path(digest)
        if not (path.is_file() and path.stat().st_size == len(png)):
            atomic_write(path, png, self.tmp)
        side = self.sidecar_path(digest)
        data = json_bytes(sidecar)
        if not (side.is_file() and side.read_bytes() == data):
            atomic_write(side, data, self.tmp)
        return digest

    def read_image(self, digest: str) -> bytes:
        return self.image_path(digest).read_bytes()

    def read_sidecar(self, digest: str) -> dict:
        return json.loads(self.sidecar_path(digest).read_text("utf-8"))

    def images(self) -> list[Path]:
        return sorted((self.root / "images").glob("*/*.png"))

    # --- inputs
    def put_input(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        path = self.root / input_ref(digest)
        if not (path.is_file() and path.stat().st_size == len(data)):
            atomic_write(path, data, self.tmp)
        return digest

    def read_input(self, digest: str) -> bytes:
        return checked_input(self.location, digest, (self.root / input_ref(digest)).read_bytes())

    # --- batches
    def begin_batch(self, job_id: str, batch_id: str) -> int:
        """Count a delivery of a batch by this process; returns which one this is (1 for the first)."""
        self._append(job_id, batch_id, b"x")
        return self.deliveries(job_id, batch_id)

    def end_batch(self, job_id: str, batch_id: str) -> None:
        """Note that this process's delivery of a batch ended (it did not die in it)."""
        self._append(job_id, batch_id, b"e")

    def _append(self, job_id: str, batch_id: str, what: bytes) -> None:
        path = self.attempts_path(job_id, batch_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        host, pid = delivery_owner()
        line = b"%s %s %d\n" % (what, host.encode("utf-8", "replace"), pid)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)  # one small O_APPEND write per event
        finally:
            os.close(fd)

    def _attempts(self, job_id: str, batch_id: str) -> list[list[str]]:
        try:
            data = self.attempts_path(job_id, batch_id).read_bytes()
        except FileNotFoundError:
            return []
        return [line.split() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]

    def deliveries(self, job_id: str, batch_id: str) -> int:
        """How many times a batch was started since it was last submitted (0: never)."""
        return sum(fields[0] == "x" for fields in self._attempts(job_id, batch_id))

    def unfinished(self, job_id: str, batch_id: str) -> list[tuple[str, int]]:
        """The deliveries of a batch that began and did not end, as (host, pid) of their process:
        running now (or stopped), or their process died (base.open_deliveries)."""
        return open_deliveries((fields[0], (fields[1] if len(fields) > 1 else "",
                                            int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else 0))
                               for fields in self._attempts(job_id, batch_id))

    def reset_batch(self, job_id: str, batch_id: str) -> None:
        """Forget a batch's deliveries (the coordinator does this when it submits the batch)."""
        self.attempts_path(job_id, batch_id).unlink(missing_ok=True)

    @contextlib.contextmanager
    def _locked(self, job_id: str) -> Iterator[None]:
        """The job's batch-result lock (flock on jobs/<job>/batches.lock; NFS clients emulate it with
        POSIX locks): one merge-and-rewrite at a time, across processes and machines."""
        path = self.job_dir(job_id) / "batches.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def write_batch_result(self, job_id: str, result: dict) -> dict:
        """Merge `result` into the stored one, frame by frame (base.merge_batch_results: results only
        move forward), and write it atomically; returns what the store now holds."""
        with self._locked(job_id):
            try:
                old = self.read_batch_result(job_id, result["batch"])
            except (ValueError, RuntimeError):  # not a batch result (a damaged file): replaced
                old = None
            merged = merge_batch_results(old, result)
            atomic_write_json(self.batch_result_path(job_id, result["batch"]), merged, self.tmp)
        return merged

    def read_batch_result(self, job_id: str, batch_id: str) -> dict | None:
        """The batch's result, None when there is none (StoreError when it is not a batch result)."""
        try:
            return read_document(self.batch_result_path(job_id, batch_id), check_batch_result)
        except OSError:
            return None

    def remove_batch_result(self, job_id: str, batch_id: str) -> None:
        self.batch_result_path(job_id, batch_id).unlink(missing_ok=True)

    # --- jobs
    def write_job(self, job_id: str, state: dict) -> None:
        atomic_write_json(self.job_path(job_id), state, self.tmp)

    def read_job(self, job_id: str) -> dict:
        return read_document(self.job_path(job_id), check_job)

    def append_job_log(self, job_id: str, record: dict) -> None:
        append_json_line(self.job_log_path(job_id), record)

    def read_job_log(self, job_id: str, after: int = 0) -> list[dict]:
        """Every record (one read of one file; the reader skips those numbered `after` or below)."""
        return read_json_lines(self.job_log_path(job_id))

    def write_index(self, job_id: str, index: dict) -> None:
        atomic_write_json(self.index_path(job_id), dict(sorted(index.items())), self.tmp)

    def read_index(self, job_id: str) -> dict:
        try:
            return json.loads(self.index_path(job_id).read_text("utf-8"))
        except FileNotFoundError:
            return {}

    def job_ids(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "jobs").glob("*.json"))

    def has_job(self, job_id: str) -> bool:
        return self.job_path(job_id).exists()

    def job_location(self, job_id: str) -> str:
        return str(self.job_path(job_id))

    def job_time(self, job_id: str) -> float | None:
        """When the job's document was last written (its file's mtime); None when it is not there."""
        try:
            return self.job_path(job_id).stat().st_mtime
        except OSError:
            return None

    def remove_job(self, job_id: str) -> None:
        """Forget a job: its document and everything under jobs/<job>/ (images stay: they are shared)."""
        self.job_path(job_id).unlink(missing_ok=True)
        shutil.rmtree(self.job_dir(job_id), ignore_errors=True)
        try:
            (self.root / "jobs").rmdir()
        except OSError:
            pass

    # --- artefacts: files a job's later steps write (comparison results, heatmaps, diffs)
    def put_artefact(self, job_id: str, name: str, data: bytes) -> str:
        """Store `data` as the job's artefact `name` (a relative POSIX path); returns its reference."""
        path = self._artefact_path(job_id, name)
        atomic_write(path, data, self.tmp)
        return path.relative_to(self.root).as_posix()

    def read_artefact(self, job_id: str, name: str) -> bytes | None:
        try:
            return self._artefact_path(job_id, name).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def local_path(self, ref: str) -> Path | None:
        """The file behind a reference returned by put_artefact (or an image's), if it exists here."""
        p = (self.root / ref).resolve()
        return p if p.is_relative_to(self.root.resolve()) and p.is_file() else None

    def image_ref(self, digest: str) -> str:
        return self.image_path(digest).relative_to(self.root).as_posix()

    def _artefact_path(self, job_id: str, name: str) -> Path:
        p = (self.job_dir(job_id) / name).resolve()
        if not p.is_relative_to(self.job_dir(job_id).resolve()) or name.startswith("/"):
            raise ValueError(f"artefact name {name!r} leaves the job's folder")
        return p
