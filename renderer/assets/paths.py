"""The game's rules for the texture paths a model names, shared by every lookup: `refusal` (paths
never looked up) and `extension_variants` (the Reforged extension fallback). The search order and
the rest of the rules are in renderer.assets.search and renderer.formats.textures.resolve."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

__all__ = ["EXTENSIONS", "SEPARATORS", "WHERE", "extension_variants", "refusal"]

EXTENSIONS = (".blp", ".dds", ".tga")
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
    """The file name with the named extension first, then the Reforged fallback extensions."""
    suffix = PurePosixPath(name).suffix
    if suffix.lower() not in EXTENSIONS:
        return [name]
    stem = name[: -len(suffix)]
    return [name] + [stem + ext for ext in EXTENSIONS if ext != suffix.lower()]
