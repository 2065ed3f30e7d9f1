"""Where a report keeps its images, and putting them there.

A report folder holds every image its pages show under ``img/``, in shards by the first two
characters of the file's name (``img/ab/abcdef....png``), so a run of a million traces never puts a
million files in one folder. Frames and goldens are named by the sha256 of their PNG bytes
(`image_relpath(digest)`); heatmaps by their artefact's name (`heatmap_relpath(ref)`). Every
reader of a report's images (its pages, junit.xml's attachments, summary.md's links, `farm serve`)
asks these two functions, never spelling the layout again.

`ReportImages.add`/`add_ref` put a file in once: a hard link to the store's file where both are on
one file system (images are content-addressed and never change, so a link costs nothing and the
report stays whole when the store is cleaned), else an atomic copy; a name already there is kept.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from farm.files import atomic_write

__all__ = ["ReportImages", "heatmap_relpath", "image_relpath"]

IMAGES = "img"  # the folder of a report that holds its images


def _sharded(name: str) -> str:
    return f"{IMAGES}/{name[:2]}/{name}"


def image_relpath(digest: str) -> str:
    """The path, relative to the report folder, of the frame or golden whose PNG bytes have sha256 `digest`."""
    return _sharded(f"{digest}.png")


def heatmap_relpath(ref: str) -> str:
    """The path, relative to the report folder, of a heatmap artefact (its store reference `ref`)."""
    return _sharded(PurePosixPath(ref).name)


def _put(src: Path, dest: Path) -> None:
    """`src` at `dest`, whole or not at all: a hard link, else an atomic copy (another file system)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except FileExistsError:
        return
    except OSError:  # another file system, or links not allowed: copy
        atomic_write(dest, src.read_bytes())


class ReportImages:
    """Puts images into a report folder once each; returns the URL a page at `prefix` uses for them."""

    def __init__(self, out: Path, prefix: str = "", placed: set[str] | None = None):
        self.out = Path(out)
        self.prefix = prefix  # "" for pages in the report folder, "../" for those in pages/
        # relpaths known to be in the folder: shared by the pages of one report, so an image shown on
        # several (a card and a filmstrip) is looked for once
        self.placed = set() if placed is None else placed

    def add(self, src: str | Path | None, relpath: str) -> str | None:
        """Put file `src` at `relpath` (None when there is no such file)."""
        if not src:
            return None
        if relpath not in self.placed:
            dest = self.out / relpath
            if not dest.is_file():
                src = Path(src)
                if not src.is_file():
                    return None
                _put(src, dest)
            self.placed.add(relpath)
        return self.prefix + relpath

    def add_ref(self, store, ref: str | None, relpath: str) -> str | None:
        """Put a store's file (an image or artefact reference) at `relpath`."""
        if not ref:
            return None
        if relpath not in self.placed:
            dest = self.out / relpath
            if not dest.is_file():
                path = store.local_path(ref)
                if path is None:
                    return None
                _put(Path(path), dest)
            self.placed.add(relpath)
        return self.prefix + relpath
