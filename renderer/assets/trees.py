"""Where asset bytes live: a folder tree or an MPQ archive, each answering "which entry under this
base matches these path components?" with the game's rules (case-insensitive components).

`AssetFolder` lists each directory once, lazily, into a lower-case index (a snapshot for the
store's lifetime); where several names match case-insensitively the exact-case one is tried first,
then the others in sorted order, with a note. `AssetArchive` asks the archive by name (the MPQ hash
is case-insensitive and treats / and \\ alike), so it needs no (listfile).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

from renderer.assets.mpq import MpqArchive, MpqError, entry_name

MAX_OPEN_ARCHIVES = 32


class AssetFolder:
    """One folder tree on disk."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._listings: dict[str, dict[str, list[str]] | None] = {}
        try:
            self.real: Path | None = self.root.resolve(strict=True)
        except (OSError, RuntimeError):
            self.real = None

    def label(self, prefix: tuple[str, ...] = ()) -> str:
        return str(self.root.joinpath(*prefix))

    def _listing(self, directory: Path) -> dict[str, list[str]] | None:
        key = os.fspath(directory)
        if key not in self._listings:
            index: dict[str, list[str]] | None = {}
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        index.setdefault(entry.name.lower(), []).append(entry.name)
            except OSError:
                index = None
            for names in (index or {}).values():
                names.sort()
            self._listings[key] = index
        return self._listings[key]

    def names(self, prefix: tuple[str, ...] = ()) -> list[str]:
        """The entry names of the folder `prefix` (its actual spelling), for map-root detection."""
        listing = self._listing(self.root.joinpath(*prefix)) or {}
        return [n for names in listing.values() for n in names]

    def matches(self, prefix: tuple[str, ...], parts: list[str], notes: list[str]) -> list[Path]:
        """Files under root/prefix matching `parts` case-insensitively, best first."""
        found: list[Path] = []
        frontier = [self.root.joinpath(*prefix)]
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            following: list[Path] = []
            for directory in frontier:
                names = (self._listing(directory) or {}).get(part.lower(), [])
                if len(names) > 1:
                    notes.append(f"{len(names)} entries in {directory} match {part!r} case-insensitively: "
                                 f"{names}; trying the exact-case one first, then sorted order")
                for name in sorted(names, key=lambda n: n != part):
                    candidate = directory / name
                    if last:
                        if candidate.is_file():
                            found.append(candidate)
                    elif candidate.is_dir():
                        following.append(candidate)
            frontier = following
        return found

    def find(self, prefix: tuple[str, ...], parts: list[str], notes: list[str], fences: list[Path] | None):
        """(where, read) of the first match whose real path is inside one of `fences` (None: any), or None."""
        for candidate in self.matches(prefix, parts, notes):
            if fences is None:
                return str(candidate), candidate.read_bytes
            try:
                real = candidate.resolve(strict=True)
                inside = any(real.is_relative_to(f) for f in fences)
            except (OSError, RuntimeError):
                real, inside = candidate, False
            if inside:
                return str(candidate), candidate.read_bytes
            notes.append(f"refused {candidate}: a link to {real}, outside the searched folders")
        return None


class AssetArchive:
    """One MPQ archive (a map, a game archive or any .mpq)."""

    def __init__(self, archive: MpqArchive):
        self.archive = archive
        self.root = archive.path
        self._spelling: dict[str, str] | None = None

    def spelling(self, name: str) -> str:
        """The archive's own spelling of an entry name when its listfile names it, else `name`."""
        if self._spelling is None:
            try:
                self._spelling = {n.upper(): n for n in self.archive.names()}
            except MpqError:
                self._spelling = {}
        return self._spelling.get(name.upper(), name)

    def label(self, prefix: tuple[str, ...] = ()) -> str:
        return f"{self.root}:{entry_name('/'.join(prefix))}" if prefix else f"{self.root}"

    def names(self, prefix: tuple[str, ...] = ()) -> list[str]:
        return []

    def find(self, prefix: tuple[str, ...], parts: list[str], notes: list[str], fences: list[Path]):
        name = entry_name("\\".join((*prefix, *parts)))
        try:
            if not self.archive.has(name):
                return None
        except MpqError as e:
            notes.append(str(e))
            return None
        return f"{self.root}:{self.spelling(name)}", lambda: self.archive.read(name)


_archives: OrderedDict[tuple, MpqArchive] = OrderedDict()
_archives_lock = threading.Lock()
_archives_pid = os.getpid()


def open_archive(path: str | os.PathLike, listfile: str | os.PathLike | None = None) -> MpqArchive:
    """A shared, open MpqArchive for `path` (per process; the least recently used of more than
    MAX_OPEN_ARCHIVES is closed). Reopened when the file changes. MpqError when it is not one."""
    p = Path(path)
    try:
        st = p.stat()
        key = (os.path.realpath(p), st.st_mtime_ns, st.st_size, str(listfile or ""))
    except OSError:
        key = (str(p), 0, 0, str(listfile or ""))
    global _archives_pid
    with _archives_lock:
        if _archives_pid != os.getpid():
            # A forked worker: handles (and their file offsets) belong to the parent; open our own.
            _archives.clear()
            _archives_pid = os.getpid()
        archive = _archives.get(key)
        if archive is not None:
            _archives.move_to_end(key)
            return archive
    archive = MpqArchive(p, listfile)
    with _archives_lock:
        _archives[key] = archive
        while len(_archives) > MAX_OPEN_ARCHIVES:
            _archives.popitem(last=False)[1].close()
    return archive


def close_archives() -> None:
    """Close every shared archive handle (open_archive reopens on demand)."""
    with _archives_lock:
        while _archives:
            _archives.popitem()[1].close()
