"""Incremental state of a thumbnail folder: what each model's thumbnail was made from.

    DIR/.farm/state.json     the state as of the last finished run (written atomically)
    DIR/.farm/journal.jsonl  one JSON line per model finished since then (appended as each finishes)
    DIR/.farm/lock           held (flock) while a run writes DIR: two runs on one folder would mix

Each model's record holds the sha256 of the model file it was rendered from and a fingerprint of
the options that decide its pixels (size, sequence and time asked for, format, team colour,
missing-texture mode, the asset roots, the renderer version), plus what the index shows.

The journal is what makes a run resumable: the coordinator appends a model's line right after
writing its image (image first, so a line never names a missing file), in one write, so a run
killed at any moment leaves every finished model recorded, at worst with a torn last line, which
loading ignores (that model renders again). Appending keeps the cost per model constant however
large the tree; a finished run folds the journal into state.json and empties it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from farm.files import LineAppender, atomic_write, json_line, json_wide_encoded

__all__ = ["FILE_KEYS", "FORMAT", "ThumbState", "StateLocked", "fingerprint"]

FORMAT = "modelfarm.thumbnails-state/1"
# a record's output files (folder-relative)
FILE_KEYS = ("thumbnail", "sidecar", "digest_thumbnail", "animation", "animation_sidecar")


class StateLocked(RuntimeError):
    """Another run holds this folder."""


def fingerprint(options: dict) -> str:
    body = json.dumps(options, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:24]


class ThumbState:
    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._tmp = self.folder / "tmp"  # made once: every write of a run names it
        self.records: dict[str, dict] = {}
        self.sheets: dict[str, str] = {}  # sheet file (relative to DIR) -> fingerprint of its content
        self.files: set[str] = set()  # every output file any record named (to remove the ones no longer wanted)
        self._lock_fd: int | None = None
        self._journal = LineAppender(self.journal_path)  # open from the first record to compact or unlock

    @property
    def state_path(self) -> Path:
        return self.folder / "state.json"

    @property
    def journal_path(self) -> Path:
        return self.folder / "journal.jsonl"

    @property
    def tmp(self) -> Path:
        return self._tmp

    # --- lock
    def lock(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # no flock on this system: no protection, but no failure either
            pass
        except OSError:
            os.close(fd)
            raise StateLocked(f"another `farm thumbnails` is writing {self.folder.parent}; wait for it or use"
                              f" another --out") from None
        self._lock_fd = fd

    def unlock(self) -> None:
        self._journal.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    # --- reading
    def load(self) -> None:
        try:
            data = json.loads(self.state_path.read_text("utf-8"))
        except (OSError, ValueError):
            data = {}
        if data.get("format") == FORMAT:
            self.records = dict(data.get("models") or {})
            self.sheets = dict(data.get("sheets") or {})
        for rec in self.records.values():
            self._note_files(rec)
        try:
            raw = self.journal_path.read_bytes()
        except OSError:
            raw = b""
        for line in raw.splitlines():
            try:
                entry = json.loads(line)
                model_id, rec = entry["id"], entry["record"]
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line from a killed run: that model renders again
            if isinstance(model_id, str) and isinstance(rec, dict):
                self.records[model_id] = rec
                self._note_files(rec)

    def _note_files(self, rec: dict) -> None:
        for k in FILE_KEYS:
            if rec.get(k):
                self.files.add(rec[k])

    # --- writing
    def record(self, model_id: str, rec: dict) -> None:
        """Remember a finished model now (one appended line, whole or absent; an OSError names the journal)."""
        self.records[model_id] = rec
        self._note_files(rec)
        self._journal.append(json_line({"id": model_id, "record": rec}))

    def compact(self, keep: list[str]) -> None:
        """Write state.json with the records of `keep` (the models found this run) and empty the journal."""
        self.records = {k: self.records[k] for k in keep if k in self.records}
        doc = {"format": FORMAT, "models": self.records, "sheets": self.sheets}
        atomic_write(self.state_path, json_wide_encoded(doc, "models"), self.tmp)  # a model a line, in pieces
        self._journal.close()
        self.journal_path.unlink(missing_ok=True)
