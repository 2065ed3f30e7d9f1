"""What changed in a golden index since a comparison was made against it.

`farm serve` keeps its page current with decisions made anywhere (its own buttons, a `farm approve`
or `farm approve --undo` in a terminal, a `git pull` of the goldens): it remembers the index lines
its results were compared with, and after any change compares again only the traces whose lines
differ. Reading the index file is skipped while its stat (inode, size, times) is the one seen, except
for a file changed in the last `RACY_S` seconds, whose stat alone cannot prove it unchanged (a rewrite
within the file system's clock tick can keep size and times: git's "racy" rule).
"""

from __future__ import annotations

import time
from pathlib import Path

from farm.goldens import GoldenIndex

__all__ = ["IndexWatch", "changed_traces"]

RACY_S = 2.0
_MISSING = ("missing",)  # the stat of an index that does not exist (yet): as cheap to check as one that does


def _stat_of(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def changed_traces(before: dict, after: dict) -> set[str]:
    """The traces with a line (any scope) that differs between two indexes' entries."""
    return {key[0] for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


class IndexWatch:
    """The golden index at `root` as last seen: its digest and lines (`seen`, None before the first
    look or when a comparison could not be tied to one state of it)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.path = GoldenIndex(self.root).index_path
        self.seen: tuple[str, dict] | None = None
        self._stat: tuple | None = None
        self._looked: tuple | None = None  # the stat taken by the last look (None: racy or no file)

    def quiet(self) -> bool:
        """True when the file is certainly the one last seen (no need to read it)."""
        return self.seen is not None and self._stat is not None and (_stat_of(self.path) or _MISSING) == self._stat

    def look(self) -> tuple[GoldenIndex, str]:
        """The index now and its digest (the stat is taken first: a change after it shows next time)."""
        st = _stat_of(self.path)
        index = GoldenIndex.load(self.root)
        racy = st is not None and time.time_ns() - st[2] < RACY_S * 1e9
        self._looked = None if racy else (st or _MISSING)
        return index, index.digest()

    def changes(self, index: GoldenIndex, digest: str) -> set[str] | None:
        """Traces whose lines changed since `seen` (empty: none); None when nothing was seen."""
        if self.seen is None:
            return None
        if self.seen[0] == digest:
            return set()
        return changed_traces(self.seen[1], index.entries)

    def saw(self, index: GoldenIndex, digest: str) -> None:
        """The results are now current with `index` (the one `look` returned)."""
        if self.seen is None or self.seen[0] != digest:
            self.seen = (digest, dict(index.entries))
        self._stat = self._looked

    def forget(self) -> None:
        self.seen, self._stat = None, None

