"""Model sources: a file path, or an entry of an archive written `ARCHIVE:ENTRY`, e.g.
`maps/foo.w3x:war3mapImported/Ghost.mdx` (split after the first archive extension followed by
':'; the entry may use / or \\ and any case). A model loaded from an archive uses that archive as
its map root for textures. `list_models(archive, pattern)` lists the models an archive holds, as
sources, for manifests and thumbnails.
"""

from __future__ import annotations

import os
from pathlib import Path

from renderer.assets.mpq import MpqError, entry_name
from renderer.assets.search import split_source
from renderer.assets.stores import open_archive
from renderer.errors import FormatError

MODEL_PATTERNS = ("**/*.mdx", "**/*.mdl")


def source_name(archive: str | os.PathLike, entry: str) -> str:
    """The source string of an archive entry (entry with forward slashes, as users type it)."""
    return f"{os.fspath(archive)}:{entry_name(entry).replace(chr(92), '/')}"


def read_source(source: str | os.PathLike, listfile=None) -> bytes:
    """The bytes of a source (a file, or an archive entry); FormatError when they cannot be read."""
    split = split_source(source)
    try:
        if split is None:
            return Path(source).read_bytes()
        return open_archive(split[0], listfile).read(split[1])
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
