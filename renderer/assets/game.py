"""A Warcraft III installation's archives, in the order the game searches them (patch first).

Classic installations (up to 1.28) keep their data in MPQ archives next to the executable:
`war3.mpq` (Reign of Chaos), `War3x.mpq` and `War3xLocal.mpq` (The Frozen Throne) and
`War3Patch.mpq`; the game reads a file from the first of War3Patch, War3xLocal, War3x, War3Local,
war3 that holds it. `game_archives(DIR)` finds them (any case) in that order.

Reforged (1.30+) keeps its data in a CASC storage (`Data/` plus `.build.info`), which no
maintained Python library reads (PyPI has `casc` 0.0.1 of 2023, a CascLib binding, and `pycasc`
0.1.0 of 2019, each a single release; Debian packages no CascLib). To use it: extract the files
once with a CASC tool (e.g. CascView, by StormLib's author) into a folder, keeping the storage's
paths, and give the folder that holds `Textures`, `ReplaceableTextures`, ... as game data or as an
asset root: folders and archives are searched alike. Reforged stores the classic (SD) tree under
`war3.w3mod` and the HD overrides under `war3.w3mod/_hd.w3mod`; give the HD folder first, then
the SD one, to search as the game does in HD mode.
"""

from __future__ import annotations

import os
from pathlib import Path

# Search order of the classic game's archives: the first one holding a name wins.
GAME_ARCHIVES = ("War3Patch.mpq", "War3xLocal.mpq", "War3x.mpq", "War3Local.mpq", "war3.mpq")
CASC_MARKERS = (".build.info", "Data")


class GameDataError(Exception):
    """One sentence: the folder and why no game data was found there."""


class CascStorageError(GameDataError):
    """The folder is a Reforged CASC installation, which must be extracted first."""


def _rank(path: Path) -> int:
    """Position in GAME_ARCHIVES; -1 (searched before the game's own) for other names."""
    names = [n.lower() for n in GAME_ARCHIVES]
    return names.index(path.name.lower()) if path.name.lower() in names else -1


def order_archives(paths) -> list[Path]:
    """Game archives given together, in the game's search order (patch first); other archives
    (a mod's own .mpq) keep their given order ahead of the game's."""
    paths = [Path(p) for p in paths]
    return sorted(paths, key=_rank)


def game_archives(folder: str | os.PathLike) -> list[Path]:
    """The classic game archives in `folder` (any case), patch first; GameDataError when it holds
    none (naming the CASC case: Reforged data must be extracted first, see the module docstring)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise GameDataError(f"{folder}: the game folder does not exist or is not a folder")
    by_lower = {entry.name.lower(): folder / entry.name for entry in os.scandir(folder) if entry.is_file()}
    found = [by_lower[n.lower()] for n in GAME_ARCHIVES if n.lower() in by_lower]
    if found:
        return found
    if all((folder / m).exists() for m in CASC_MARKERS):
        raise CascStorageError(f"{folder}: this is a Reforged (CASC) installation, which cannot be read directly; "
                            "extract its files into a folder and give that folder as game data or an asset root")
    raise GameDataError(f"{folder}: no game archives found (looked for {', '.join(GAME_ARCHIVES)})")
