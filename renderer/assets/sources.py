"""Model sources: a file path, or an entry of an archive written `ARCHIVE:ENTRY`, e.g.
`maps/foo.w3x:war3mapImported/Ghost.mdx` (split after the first archive extension followed by
':'; the entry may use / or \\ and any case). A model loaded from an archive uses that archive as
its map root for textures. `list_models(archive, pattern)` lists the models an archive holds, as
sources, for manifests and thumbnails.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
from pathlib import Path, PurePosixPath

from renderer.assets.mpq import MpqError, entry_name
from renderer.assets.search import ARCHIVE_SUFFIXES, ModelLocation
from renderer.assets.stores import open_archive
from renderer.errors import FormatError

_SOURCE = re.compile(r"^(.*?(?:" + "|".join(re.escape(s) for s in ARCHIVE_SUFFIXES) + r")):(?![\\/]{2})(.+)$",
                     re.IGNORECASE | re.DOTALL)
# Entry extension -> "module:function" reading a model from bytes (data, path, strict=..., **options).
READERS: dict[str, str] = {
    ".mdx": "renderer.formats.mdx:read_mdx",
    ".mdl": "renderer.formats.mdl.read:read_mdl_bytes",
}
MODEL_PATTERNS = ("**/*.mdx", "**/*.mdl")


def split_source(source: str | os.PathLike) -> tuple[Path, str] | None:
    """(archive path, entry name) of an `ARCHIVE:ENTRY` source, or None for a plain path."""
    text = os.fspath(source)
    m = _SOURCE.match(text)
    if m is None or Path(text).exists():
        return None
    return Path(m.group(1)), m.group(2)


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


def load_model_source(source: str | os.PathLike, strict: bool = False, listfile=None, **options):
    """Load a model from a file path or an `ARCHIVE:ENTRY` source into the neutral Model."""
    split = split_source(source)
    if split is None:
        from renderer.formats import load_model

        return load_model(source, strict=strict, **options)
    archive, entry = split
    ext = PurePosixPath(entry.replace("\\", "/")).suffix.lower()
    name = source_name(archive, entry)
    if ext not in READERS:
        raise FormatError(name, "", 0, f"cannot load {ext or 'extensionless'} models from archives "
                                       f"(known: {', '.join(sorted(READERS))})")
    data = read_source(source, listfile)
    module, fn = READERS[ext].split(":")
    model = getattr(importlib.import_module(module), fn)(data, name, strict=strict, **options)
    model.location = ModelLocation(archive=archive, entry=entry_name(entry), digest=hashlib.sha256(data).hexdigest())
    return model


def list_models(archive: str | os.PathLike, patterns=MODEL_PATTERNS, listfile=None) -> list[str]:
    """The sources of the archive's entries matching any of the globs (`**/*.mdx`), sorted;
    MpqError when the archive cannot be listed (no (listfile) and no `listfile` given)."""
    mpq = open_archive(archive, listfile)
    if isinstance(patterns, str):
        patterns = (patterns,)
    names = dict.fromkeys(n for p in patterns for n in mpq.glob(p))
    return [source_name(archive, n) for n in sorted(names, key=lambda n: (n.lower(), n))]
