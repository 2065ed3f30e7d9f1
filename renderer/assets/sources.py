"""Model sources: a file path, or an entry of an archive written `ARCHIVE:ENTRY`, e.g.
`maps/foo.w3x:war3mapImported/Ghost.mdx` (split after the first archive extension followed by
':'; the entry may use / or \\ and any case). A model loaded from an archive uses that archive as
its map root for textures. `list_models(archive, pattern)` lists the models an archive holds, as
sources, for manifests and thumbnails; the models named most like a mistyped entry
(difflib), which `read_source` names when an entry is not there; `archive_usage` is the sentence
for an archive given where a model is wanted.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path, PurePosixPath

from renderer.assets.mpq import MpqArchive, MpqError, entry_name
from renderer.assets.search import ARCHIVE_SUFFIXES, split_source
from renderer.assets.trees import open_archive
from renderer.errors import FormatError

MODEL_PATTERNS = ("**/*.mdx", "**/*.mdl")
NEAREST = 3  # entries suggested for a mistyped one
NEAR_ENOUGH = 0.6  # difflib ratio below which an entry is not suggested


def is_archive(path: str | os.PathLike) -> bool:
    """Whether `path` names an archive itself (`maps/foo.w3x`), not an entry of one."""
    return split_source(path) is None and Path(path).suffix.lower() in ARCHIVE_SUFFIXES


def source_name(archive: str | os.PathLike, entry: str) -> str:
    """The source string of an archive entry (entry with forward slashes, as users type it)."""
    return f"{os.fspath(archive)}:{entry_name(entry).replace(chr(92), '/')}"


def read_source(source: str | os.PathLike, listfile=None) -> bytes:
    """The bytes of a source (a file, or an archive entry); FormatError when they cannot be read."""
    split = split_source(source)
    try:
        if split is None:
            return Path(source).read_bytes()
        archive = open_archive(split[0], listfile)
        try:
            return archive.read(split[1])
        except MpqError as e:
            if archive.has(split[1]):
                raise
            raise MpqError(e.archive, e.problem + _no_entry_hint(split[0], split[1], listfile)) from None
    except MpqError as e:
        raise FormatError(e.archive, "archive", None, e.problem) from e
    except OSError as e:
        raise FormatError(os.fspath(source), "", None, f"cannot read file: {e.strerror or e}") from e


def list_models(archive: str | os.PathLike, patterns=MODEL_PATTERNS, listfile=None) -> list[str]:
    """The sources of the archive's entries matching any of the globs (`**/*.mdx`), sorted;
    MpqError when the archive cannot be listed (no (listfile) and no `listfile` given)."""
    mpq = open_archive(archive, listfile)
    if isinstance(patterns, str):
        patterns = (patterns,)
    names = dict.fromkeys(n for p in patterns for n in mpq.glob(p))
    return [source_name(archive, n) for n in sorted(names, key=lambda n: (n.lower(), n))]


def entry_problem(source: str) -> str | None:
    """Why an archive entry that is listed cannot be opened (a name too long), or None."""
    split = split_source(source)
    return MpqArchive.name_problem(entry_name(split[1])) if split else None


def _nearest(archive: str | os.PathLike, entry: str, sources: list[str], n: int = NEAREST) -> list[str]:
    """The `sources` (the archive's models, as `list_models` gives them) whose entry names are nearest
    `entry` (difflib ratio of the lower-case paths, or of the file names when `entry` names no
    folder), best first; [] when none is near."""
    prefix = len(os.fspath(archive)) + 1
    want = entry_name(entry).replace("\\", "/").lower()
    by_name = "/" not in want

    def score(source: str) -> float:
        have = source[prefix:].lower()
        return difflib.SequenceMatcher(None, want, PurePosixPath(have).name if by_name else have).ratio()

    scored = sorted(((score(s), s) for s in sources), key=lambda x: -x[0])
    return [s for r, s in scored[:n] if r >= NEAR_ENOUGH]


def _no_entry_hint(archive, entry: str, listfile=None) -> str:
    """What follows "no such entry": the nearest model entries, else the first few models held."""
    try:
        models = list_models(archive, listfile=listfile)  # once: the nearest are chosen from these
    except MpqError:
        return ""
    near = _nearest(archive, entry, models)
    return f"; the nearest: {', '.join(near)}" if near else f"; {_holds(models)}"


def _holds(models: list[str], limit: int = NEAREST) -> str:
    if not models:
        return f"it holds no models ({', '.join(p.rsplit('/', 1)[-1] for p in MODEL_PATTERNS)})"
    more = f" and {len(models) - limit} more" if len(models) > limit else ""
    return f"it holds {len(models)} model(s): {', '.join(models[:limit])}{more}"


def archive_usage(archive: str | os.PathLike, listfile=None) -> str:
    """One sentence for an archive given where one model is wanted: how to name an entry
    (ARCHIVE:ENTRY) and the first few models it holds."""
    head = f"{os.fspath(archive)} is an archive, not a model: name a model inside it as ARCHIVE:ENTRY"
    try:
        models = list_models(archive, listfile=listfile)
    except MpqError as e:
        return f"{head} ({e.problem})"
    example = f", e.g. '{models[0]}'" if models else ""
    return f"{head}{example} ({_holds(models)})"
