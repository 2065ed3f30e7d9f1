"""Path rules. The game's rules for the texture paths a model names, shared by every lookup:
`refusal` (paths never looked up) and `extension_variants` (the Reforged extension fallback); the
search order and the rest of the rules are in renderer.assets.search and
renderer.formats.textures.resolve. And the one rule for naming an output after an untrusted name
(a model's path, an archive entry): `safe_relative`."""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath

__all__ = ["EXTENSIONS", "SEPARATORS", "SOURCE_EXTENSIONS", "WHERE", "extension_variants", "refusal", "safe_relative"]

EXTENSIONS = (".blp", ".dds", ".tga")
# Source-art extensions Reforged models name (the artists' .tif), which no texture decoder reads: the
# game and the reference viewer (mdx-m3-viewer asks a Reforged model's every texture as `.dds`, the
# name's stem with `.dds` in place of its extension) load the `.dds` that Reforged data holds.
SOURCE_EXTENSIONS = (".tif", ".tiff")
WHERE = "texture path"
_DRIVE = re.compile(r"^[A-Za-z]:")
SEPARATORS = re.compile(r"[\\/]+")


def refusal(path: str) -> str | None:
    """Why `path` may not be looked up at all, or None when it may."""
    if not path:
        return "the path is empty"
    if "\0" in path:
        return "the path contains a NUL byte"
    if path[:2] in ("\\\\", "//", "\\/", "/\\"):
        return "UNC paths are refused"
    if _DRIVE.match(path):
        return "paths with a drive letter are refused"
    if path[0] in "\\/":
        return "absolute paths are refused"
    for part in SEPARATORS.split(path):
        if part != "." and part and not part.strip(". "):
            return f"component {part!r} is a parent reference or only dots and spaces"
        if ":" in part:
            return f"component {part!r} contains ':' (drive or stream syntax)"
    return None


def extension_variants(name: str) -> list[str]:
    """The names a texture path is looked up as, in order. A .blp/.dds/.tga name: the named
    extension first, then the others of EXTENSIONS (a .blp finds Reforged's .dds next). A .tif
    (SOURCE_EXTENSIONS) name: .dds first, as the reference viewer's Reforged path solver asks it,
    then .blp, .tga, and the named file last (found, it fails to decode with its own name in the
    error). Any other extension: the name alone."""
    suffix = PurePosixPath(name).suffix
    stem = name[: -len(suffix)] if suffix else name
    if suffix.lower() in SOURCE_EXTENSIONS:
        return [stem + ".dds", *(stem + ext for ext in EXTENSIONS if ext != ".dds"), name]
    if suffix.lower() not in EXTENSIONS:
        return [name]
    return [name] + [stem + ext for ext in EXTENSIONS if ext != suffix.lower()]


SAFE_PART_BYTES = 200  # a name component kept as it is: room for a suffix (".webp.json") under NAME_MAX 255
SAFE_TOTAL_BYTES = 1024  # a whole name kept component by component: far below PATH_MAX 4096 with any folder
_HASHED = re.compile(r".*~[0-9a-f]{16}\Z", re.DOTALL)  # what a rewritten component ends with
_UNSAFE_CHARS = re.compile(r"[\x00-\x1f\x7f\\\ud800-\udfff]")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _part_ok(part: str) -> bool:
    return (bool(part.strip(". ")) and not _UNSAFE_CHARS.search(part) and not _HASHED.match(part)
            and len(part.encode("utf-8")) <= SAFE_PART_BYTES)


def _rewritten(part: str) -> str:
    """A component that may not be used as it is: its readable characters (at most 64), '~' and a
    hash of the whole component; a name kept as it is never ends like that, so none collide."""
    readable = _UNSAFE_CHARS.sub("_", part)[:64].strip(". ") or "_"
    return f"{readable}~{_digest(part)}"


def safe_relative(name: str) -> str:
    """A relative '/'-separated name, safe to join to an output folder, for an untrusted name whose
    components are separated by '/' (a model's id, an archive entry as a source names it).

    Every component stays inside the folder it is joined to: a component that is empty, only dots
    and spaces (`..`), holds a backslash, a control character (NUL) or bytes that are not UTF-8,
    or is longer than SAFE_PART_BYTES, is rewritten (`_rewritten`); a leading '/' is an empty
    first component, so it is rewritten too, and a drive letter (`C:`) is a plain folder name here.
    A name longer than SAFE_TOTAL_BYTES keeps only its last component, under a folder named by a
    hash of the whole name. The same name always gives the same result, and two different names
    never give the same one (no component kept as it is looks like a rewritten one). Names with
    nothing to rewrite are returned unchanged."""
    parts = [p if _part_ok(p) else _rewritten(p) for p in name.split("/")]
    out = "/".join(parts)
    if len(out.encode("utf-8", "surrogatepass")) > SAFE_TOTAL_BYTES:
        out = f"long~{_digest(name)}/{parts[-1]}"
    return out
