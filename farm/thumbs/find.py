"""Finding the models under the roots, in a deterministic order, each with a stable id.

A root is a folder, a model file, or a map or MPQ archive (its models, as `ARCHIVE:ENTRY` sources,
listed like the archives found in a folder). Every file whose extension is .mdx, .mdl, .model or
.gbxmodel (any case) under each root, walking
real folders only (symbolic links to folders are not followed, so a tree with a link loop ends;
links to files are taken). Order: the roots in the order given, then each root's models sorted by
their path relative to the root (code point order, '/' separated). A file reached from two
overlapping roots is listed once, under the first. The output folder is never walked.

A model's id is ``LABEL/PATH``: LABEL names its root (``--name`` when given, else the root folder's
own name; when two roots share a name, each gets ``~`` and a hash of its absolute path, so no
label depends on the order of the roots), PATH is the model's path under the root. Ids name the
thumbnails (``thumbs/<id>.png``), the index entries and the incremental state, so they must not
change between runs of the same command.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from renderer.assets import MpqError, list_models
from renderer.assets.search import ARCHIVE_SUFFIXES, split_source
from renderer.formats import READERS

__all__ = ["EXTENSIONS", "Found", "FindError", "asset_roots_for", "find_models", "root_labels"]

EXTENSIONS = tuple(READERS)  # every extension a reader is registered for (renderer.formats)


class FindError(ValueError):
    """A root that does not exist or is not a folder, a model file or an archive."""


@dataclass(frozen=True)
class Found:
    id: str  # LABEL/PATH
    root: Path  # absolute folder the path is relative to
    label: str
    rel: str  # posix path under root
    path: Path  # absolute path of the file
    size: int


def _is_model(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in EXTENSIONS


def _is_archive(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in ARCHIVE_SUFFIXES


def _archive_models(path: Path, rel: str, listfile=None) -> tuple[list[tuple[str, Path, int]], str | None]:
    """(rel, source, size) of each model inside a map or MPQ archive, or an error sentence."""
    try:
        sources = list_models(path, listfile=listfile)
    except MpqError as e:
        return [], str(e)
    size = path.stat().st_size
    return [(f"{rel}:{s.split(':', 1)[1] if s.startswith(str(path) + ':') else s}", Path(s), size)
            for s in sources], None


def root_labels(roots: list[Path], names: list[str] | None = None) -> list[str]:
    """Each root's label: its name from `names` (--name, one per root), else its folder's name, and
    for a name two roots share, ``NAME~`` and 8 hex of the sha256 of the root's absolute path (the
    same whatever the order of the roots). Two equal explicit names are a FindError."""
    if names:
        if len(names) != len(roots):
            raise FindError(f"--name: {len(names)} name(s) for {len(roots)} root(s); give one per root")
        if len(set(names)) != len(names) or not all(n and "/" not in n for n in names):
            raise FindError("--name: every root needs its own non-empty name without '/'")
        return list(names)
    bases = [root.name or "root" for root in roots]
    return [base if bases.count(base) == 1 else
            f"{base}~{hashlib.sha256(str(Path(root).absolute()).encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"
            for base, root in zip(bases, roots, strict=True)]


def _folder_of(root: Path) -> Path:
    return root.parent if root.is_file() else root


def _checked_roots(roots: list[str | Path]) -> list[Path]:
    """The roots as absolute paths, each a folder, a model file or an archive (else FindError)."""
    resolved: list[Path] = []
    for r in roots:
        p = Path(r).absolute()
        if not p.exists():
            raise FindError(f"{r}: no such folder")
        if p.is_file() and not _is_model(p.name) and not _is_archive(p.name):
            raise FindError(f"{r}: not a folder, a model file ({', '.join(EXTENSIONS)}) or an archive"
                            f" ({', '.join(ARCHIVE_SUFFIXES)})")
        if not (p.is_dir() or p.is_file()):
            raise FindError(f"{r}: not a folder")
        resolved.append(p)
    return resolved


def find_models(roots: list[str | Path], exclude: list[str | Path] = (), listfile=None,
                errors: list[str] | None = None, names: list[str] | None = None,
                follow_links: bool = False) -> list[Found]:
    """Every model file under `roots`, and every model inside the map and MPQ archives there
    (`maps/keep.w3x:war3mapImported/Ghost.mdx`); an archive that cannot be listed (no (listfile)
    and no `listfile` given) is named in `errors` instead, and so is a model or archive that is a
    link whose real path leaves every root named (refused unless `follow_links`: a site rendering
    uploads must not read /etc/passwd through a link; issue 34 item 4)."""
    resolved = _checked_roots(roots)
    skip = {os.path.realpath(x) for x in exclude}
    fences = None if follow_links else [Path(os.path.realpath(_folder_of(p))) for p in resolved]
    errors = [] if errors is None else errors

    fence_texts = None if fences is None else [str(f).rstrip(os.sep) + os.sep for f in fences]

    def leaves(path: Path | str, shown: str, real: str | None = None) -> bool:
        """Whether `path` (whose real path is `real`, when the caller knows it) leads out of every root."""
        real = real or os.path.realpath(path)
        if fence_texts is None or any((real + os.sep).startswith(f) for f in fence_texts):
            return False
        errors.append(f"{shown}: refused: a link to {real}, outside the roots named (--follow-links follows it)")
        return True

    labels = root_labels([_folder_of(p) for p in resolved], names)
    seen: set[str] = set()
    out: list[Found] = []
    for root, label in zip(resolved, labels, strict=True):
        folder = _folder_of(root)
        rels: list[str] = []
        start = len(out)
        if root.is_file() and _is_archive(root.name):
            entries, error = _archive_models(root, root.name, listfile)
            if error:
                errors.append(error)
            out.extend(Found(f"{label}/{rel}", folder, label, rel, source, size) for rel, source, size in entries)
        elif root.is_file():
            rels.append(root.name)
        else:
            for dirpath, dirnames, filenames in os.walk(folder):
                dirnames[:] = sorted(d for d in dirnames
                                     if os.path.realpath(os.path.join(dirpath, d)) not in skip)
                base = Path(dirpath).relative_to(folder)
                under = "" if dirpath == str(folder) else base.as_posix() + "/"  # once a folder, not a file
                rels.extend(under + f for f in filenames if _is_model(f))
                for f in sorted(filenames):
                    if _is_archive(f) and not leaves(Path(dirpath) / f, f"{label}/{(base / f).as_posix()}"):
                        entries, error = _archive_models(Path(dirpath) / f, (base / f).as_posix(), listfile)
                        if error:
                            errors.append(error)
                        out.extend(Found(f"{label}/{rel}", folder, label, rel, source, size)
                                   for rel, source, size in entries)
        real_dirs: dict[str, str] = {}  # a folder (relative) -> its real path: resolved once, not once a model
        for rel in sorted(rels):
            path = folder / rel
            try:
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):  # a link: where it leads, and what is there
                    real, st = os.path.realpath(path), os.stat(path)
                else:  # the real path of its folder, and its name
                    head, name = os.path.split(rel)
                    if head not in real_dirs:
                        real_dirs[head] = os.path.realpath(os.path.join(folder, head))
                    real = os.path.join(real_dirs[head], name)
                if not stat.S_ISREG(st.st_mode):
                    continue
                size = st.st_size
            except OSError:
                continue
            if real in seen or leaves(path, f"{label}/{rel}", real):
                continue
            seen.add(real)
            out.append(Found(f"{label}/{rel}", folder, label, rel, path, size))
        out[start:] = sorted(out[start:], key=lambda f: f.rel)
    return out


def asset_roots_for(found: Found, roots: list[str | Path], extra: list[str | Path] = ()) -> list[str]:
    """Where a model's textures are looked for after its own folder: each folder above it up to its
    root (nearest first: a map keeps its textures at its top), the other roots, then `extra`."""
    out: list[str] = []
    split = split_source(str(found.path))
    d = (split[0] if split else found.path).parent
    while d != found.root and found.root in d.parents:
        d = d.parent
        out.append(str(d))
    for r in [*roots, *extra]:
        s = str(_folder_of(Path(r).absolute()))
        if s not in out and s != str(found.path.parent):
            out.append(s)
    return out
