"""The output store: a folder every worker can reach (local disk, NFS, a shared volume).

    OUT/
      images/ab/<sha256>.png      frames, named by the sha256 of their PNG bytes
      images/ab/<sha256>.json     sidecar: the trace (incl. the GL environment) and diagnostics
      jobs/<job>.json             job state (farm.jobs): per-trace status, written by `farm run`
      jobs/<job>/index.json       trace key -> image digest, for the traces that rendered
      jobs/<job>/batches/<id>.json  each batch's result, written by the worker that rendered it
      jobs/<job>/attempts/<id>    one line per delivery of a batch (bounds crash loops)
      tmp/                        temporary files (same file system, so renames are atomic)

Every file is written to tmp/ and renamed into place, so a reader never sees half a file and a
process killed mid-write leaves nothing but a stray file in tmp/. Names are content hashes and
the bytes of a frame are a pure function of its trace, so a batch that runs twice (a redelivered
Celery message, a retry) writes the same files again: there are no duplicates to clean up. The
sidecar and the batch result hold nothing that varies between runs (no times, hosts or pids).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

__all__ = ["Store", "atomic_write", "atomic_write_json"]


def atomic_write(path: str | Path, data: bytes, tmp_dir: str | Path | None = None) -> None:
    """Write `data` to `path` through a temporary file in `tmp_dir` (default: path's folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tmp_dir) if tmp_dir is not None else path.parent
    tmp_dir.mkdir(parents=True, exist_ok=True)
    tmp = tmp_dir / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "wb") as f:  # no fsync: the rename is what readers rely on; a lost frame re-renders
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def atomic_write_json(path: str | Path, obj, tmp_dir: str | Path | None = None) -> None:
    atomic_write(path, _json_bytes(obj), tmp_dir)


class Store:
    def __init__(self, root: str | Path):
        self.root = Path(root).absolute()

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
        data = _json_bytes(sidecar)
        if not (side.is_file() and side.read_bytes() == data):
            atomic_write(side, data, self.tmp)
        return digest

    def read_image(self, digest: str) -> bytes:
        return self.image_path(digest).read_bytes()

    def read_sidecar(self, digest: str) -> dict:
        return json.loads(self.sidecar_path(digest).read_text("utf-8"))

    def images(self) -> list[Path]:
        return sorted((self.root / "images").glob("*/*.png"))

    # --- batches
    def begin_batch(self, job_id: str, batch_id: str) -> int:
        """Count a delivery of a batch; returns which one this is (1 for the first)."""
        path = self.attempts_path(job_id, batch_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, b"x\n")  # one small O_APPEND write per delivery
        finally:
            os.close(fd)
        return path.read_bytes().count(b"\n")

    def reset_batch(self, job_id: str, batch_id: str) -> None:
        """Forget a batch's deliveries (the coordinator does this when it submits the batch)."""
        self.attempts_path(job_id, batch_id).unlink(missing_ok=True)

    def write_batch_result(self, job_id: str, result: dict) -> None:
        atomic_write_json(self.batch_result_path(job_id, result["batch"]), result, self.tmp)

    def read_batch_result(self, job_id: str, batch_id: str) -> dict | None:
        try:
            return json.loads(self.batch_result_path(job_id, batch_id).read_text("utf-8"))
        except (OSError, ValueError):
            return None

    def remove_batch_result(self, job_id: str, batch_id: str) -> None:
        self.batch_result_path(job_id, batch_id).unlink(missing_ok=True)

    # --- jobs
    def write_job(self, job_id: str, state: dict) -> None:
        atomic_write_json(self.job_path(job_id), state, self.tmp)

    def read_job(self, job_id: str) -> dict:
        return json.loads(self.job_path(job_id).read_text("utf-8"))

    def write_index(self, job_id: str, index: dict) -> None:
        atomic_write_json(self.index_path(job_id), dict(sorted(index.items())), self.tmp)

    def read_index(self, job_id: str) -> dict:
        try:
            return json.loads(self.index_path(job_id).read_text("utf-8"))
        except FileNotFoundError:
            return {}

    def job_ids(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "jobs").glob("*.json"))
