"""The one search rule for a model's assets (textures, Halo bitmap tags, child models), and the
record of every lookup.

Order (docs/DESIGN.md, "Where textures are found"):

1. the model's folder (or, for a model inside an archive, its entry's folder there);
2. each folder above it up to the map root: a folder named `*.w3x`/`*.w3m` (any case) or one
   holding a `war3map*` entry (`war3map.w3i`, `war3mapImported`, ...: extracted maps often lose
   their w3i); an archive is its own map root. When no map root is above the model: each folder up
   to `stop_at` (the asset or job root holding the model) when it is above the model, else the
   model's folder alone;
3. the asset roots, in the order given (folders or MPQ archives);
4. game data: archives in the game's order (patch first, `renderer.assets.game`) or folders.

Within that order today's path rules hold (`renderer.formats.textures.resolve`): backslashes or
slashes, every component case-insensitive; for the named extension first, then each Reforged
fallback extension: the full path in every base, then the basename alone in every base; refused
outright: empty, NUL, absolute, drive, UNC, `..`, `:` paths; a folder match whose real path leaves
the searched folders is skipped.

Every lookup is recorded once per search (`AssetSearch.record`): found ones as
{kind, asked, found: "path" or "archive:entry", sha256, how}, missing ones as
{kind, asked, missing: True, why, looked: [every base tried]}.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from renderer.assets.game import CascStorageError, GameDataError, game_archives, order_archives
from renderer.assets.mpq import MpqError, entry_name
from renderer.assets.paths import SEPARATORS, extension_variants, refusal
from renderer.assets.trees import AssetArchive, AssetFolder, open_archive

MAP_SUFFIXES = (".w3x", ".w3m")
ARCHIVE_SUFFIXES = (".mpq", ".w3x", ".w3m", ".w3n")
MAP_MARKER = "war3map"  # a folder holding an entry named war3map* (any case) is a map root
_SOURCE = re.compile(r"^(.*?(?:" + "|".join(re.escape(s) for s in ARCHIVE_SUFFIXES) + r")):(?![\\/]{2})(.+)$",
                     re.IGNORECASE | re.DOTALL)


def split_source(source: str | os.PathLike) -> tuple[Path, str] | None:
    """(archive path, entry name) of an `ARCHIVE:ENTRY` source, or None for a plain path."""
    text = os.fspath(source)
    m = _SOURCE.match(text)
    # os.path.exists, not Path.exists: a name the system cannot look up (too long, a NUL) names
    # nothing on disk, so an archive entry holding one is still an entry (Path.exists raises).
    if m is None or os.path.exists(text):
        return None
    return Path(m.group(1)), m.group(2)



@dataclass(frozen=True)
class ModelLocation:
    """Where a model's bytes came from: a folder on disk, or an entry of an archive."""

    folder: Path | None = None
    archive: Path | None = None
    entry: str = ""  # the model's entry name inside `archive` (backslashes)
    digest: str = ""  # sha256 of the model's bytes, when the loader knows it

    @classmethod
    def from_path(cls, path: str) -> ModelLocation:
        """The location a path names ("dir/x.mdx", or "maps/foo.w3x:war3mapImported/x.mdx"); no digest.
        A loaded model's, with its digest, is its context's (renderer.context)."""
        split = split_source(path) if path else None
        if split is not None:
            return cls(archive=split[0], entry=entry_name(split[1]))
        return cls(folder=Path(os.path.abspath(path)).parent if path else Path(os.path.abspath(".")))

    def entry_folder(self) -> tuple[str, ...]:
        return tuple(entry_name(self.entry).split("\\")[:-1]) if self.entry else ()


@dataclass(frozen=True)
class Base:
    """One place searched: a store and a folder inside it."""

    store: object  # AssetFolder | AssetArchive
    prefix: tuple[str, ...]
    role: str  # "model", "map", "asset root", "game"

    @property
    def label(self) -> str:
        return self.store.label(self.prefix)


@dataclass
class Asset:
    """One asset found: what was asked, where it was found, its bytes and their sha256."""

    kind: str
    asked: str
    where: str
    data: bytes
    sha256: str
    how: str = "exact"
    notes: tuple[str, ...] = ()  # what the lookup met on the way (case-ambiguous names, refused links)
    role: str = ""  # the role of the base it was found in ("model", "map", "asset root", "game"), when searched


def is_map_folder(store: AssetFolder, prefix: tuple[str, ...]) -> bool:
    name = store.root.joinpath(*prefix).name.lower()
    if name.endswith(MAP_SUFFIXES):
        return True
    return any(n.lower().startswith(MAP_MARKER) for n in store.names(prefix))


def _model_bases(where: ModelLocation, stop_at: Path | None, errors: list[str]) -> tuple[list[Base], list[Path]]:
    """Bases 1-2 of the order (the model's folder and those above it) and the fences they allow."""
    if where.archive is not None:
        try:
            store = AssetArchive(open_archive(where.archive))
        except MpqError as e:
            errors.append(str(e))
            return [], []
        parts = where.entry_folder()
        return [Base(store, parts[:k], "model" if k == len(parts) else "map") for k in range(len(parts), -1, -1)], []
    folder = Path(os.path.abspath(where.folder or "."))
    chain = [folder, *folder.parents]
    top = 0
    probe = AssetFolder(chain[-1])
    for i, d in enumerate(chain):
        if is_map_folder(probe, d.relative_to(chain[-1]).parts):
            top = i
            break
    else:
        stop = Path(os.path.abspath(stop_at)) if stop_at is not None else None
        top = chain.index(stop) if stop in chain else 0
    root = chain[top]
    store = AssetFolder(root)
    rel = folder.relative_to(root).parts
    bases = [Base(store, rel[:k], "model" if k == len(rel) else "map") for k in range(len(rel), -1, -1)]
    return bases, [store.real] if store.real else []


def _root_base(path: Path, role: str, errors: list[str], listfile=None) -> tuple[Base | None, Path | None]:
    if path.is_dir():
        store = AssetFolder(path)
        return Base(store, (), role), store.real
    try:
        return Base(AssetArchive(open_archive(path, listfile)), (), role), None
    except MpqError as e:
        errors.append(f"{role} {e}")
        return None, None


def game_paths(game) -> list[Path]:
    """Game data as given: None, a game folder (its archives, patch first), an archive, or a list of
    archives / folders (archives put in the game's order)."""
    if game is None or game == "" or game == ():
        return []
    if isinstance(game, (str, os.PathLike)):
        game = [game]
    paths = [Path(g) for g in game]
    if len(paths) == 1 and paths[0].is_dir():
        try:
            return game_archives(paths[0])
        except CascStorageError:
            raise
        except GameDataError:
            return paths  # an extracted data folder
    return order_archives(paths)


class AssetSearch:
    """The search order for one model, and the record of what it looked up."""

    def __init__(self, bases: list[Base], fences: list[Path] | None, errors: list[str] | None = None):
        self.bases = bases
        self.fences = fences
        self.errors = list(errors or [])  # asset roots or game data that could not be opened
        self.record: list[dict] = []
        self._seen: dict[tuple[str, str], Asset | None] = {}

    @classmethod
    def for_model(cls, where: ModelLocation, asset_roots=(), game=None, stop_at=None, listfile=None,
                  follow_links: bool = False) -> AssetSearch:
        """The search for a model at `where`: its folder and those above it up to the map root (or
        `stop_at`), then `asset_roots` (folders or archives), then `game` (see `game_paths`). A file
        found through a link whose real path leaves those folders is refused unless `follow_links`."""
        errors: list[str] = []
        bases, fences = _model_bases(where, Path(stop_at) if stop_at is not None else None, errors)
        try:
            game_data = game_paths(game)
        except GameDataError as e:
            errors.append(f"game data {e}")
            game_data = []
        for role, paths in (("asset root", [Path(r) for r in asset_roots]), ("game", game_data)):
            for p in paths:
                base, fence = _root_base(p, role, errors, listfile)
                if base is not None:
                    bases.append(base)
                if fence is not None:
                    fences.append(fence)
        return cls(bases, None if follow_links else fences, errors)

    @property
    def seen(self) -> dict[tuple[str, str], Asset | None]:
        """Each lookup made, (kind, asked) -> the asset found or None."""
        return self._seen

    @property
    def has_game(self) -> bool:
        return any(b.role == "game" for b in self.bases)

    def looked(self, roles=None) -> list[str]:
        return list(dict.fromkeys(b.label for b in self.bases if roles is None or b.role in roles))

    def find(self, asked: str, kind: str = "texture", roles=None) -> Asset | None:
        """The asset `asked` names (a path as written in the model), or None; recorded either way.
        `roles` limits the bases searched (e.g. ("game",))."""
        key = (kind, asked)
        if key in self._seen:
            return self._seen[key]
        found = self._find(asked, kind, roles)
        self._seen[key] = found
        return found

    def locate(self, asked: str, roles=None) -> tuple[tuple | None, str, list[str]]:
        """Where `asked` is, without reading or recording it: ((where, read, role), how, notes) or
        (None, why, notes). `read()` returns the bytes; `role` is the role of the base it is in."""
        why = refusal(asked)
        parts = [p for p in SEPARATORS.split(asked) if p not in ("", ".")] if why is None else []
        if why is None and not parts:
            why = "it names no file"
        if why is not None:
            return None, f"refused: {why}", []
        notes: list[str] = []
        bases = [b for b in self.bases if roles is None or b.role in roles]
        for variant in extension_variants(parts[-1]):
            attempts = [("exact", [*parts[:-1], variant])]
            if len(parts) > 1:
                attempts.append(("basename", [variant]))
            for how, wanted in attempts:
                for base in bases:
                    hit = base.store.find(base.prefix, wanted, notes, self.fences)
                    if hit is None:
                        continue
                    if variant != parts[-1]:
                        how = f"{how}, extension fallback to {PurePosixPath(variant).suffix}"
                    return (*hit, base.role), how, notes
        tried = ", ".join(PurePosixPath(v).suffix or "(none)" for v in extension_variants(parts[-1]))
        return None, f"not found (extensions tried: {tried})", notes

    def _find(self, asked: str, kind: str, roles, missing: dict | None = None) -> Asset | None:
        """`missing`: what an earlier search recorded for this lookup not found (a missing record: why,
        looked, notes), recorded again if this one finds nothing either (renderer.assets.pins)."""
        hit, how, notes = self.locate(asked, roles)
        if hit is not None:
            try:
                asset = self.note_found(kind, asked, hit[0], hit[1](), how, notes)
            except (OSError, MpqError) as e:
                how = f"cannot be read: {e}"
            else:
                asset.role = hit[2]
                return asset
        if missing is not None:
            self.note_missing(kind, asked, missing.get("why", how), missing.get("looked", []), missing.get("notes", ()))
            return None
        looked = [] if how.startswith("refused") else self.looked(roles)
        self.note_missing(kind, asked, how, looked, notes)
        return None

    def note_found(self, kind: str, asked: str, where: str, data: bytes, how: str = "exact",
                   notes: list[str] = ()) -> Asset:
        """Record an asset found (also for loaders that find their own, e.g. Halo bitmap tags)."""
        asset = Asset(kind, asked, where, data, hashlib.sha256(data).hexdigest(), how, tuple(notes))
        entry = {"kind": kind, "asked": asked, "found": where, "sha256": asset.sha256, "how": how}
        if notes:
            entry["notes"] = list(notes)
        self.record.append(entry)
        return asset

    def note_missing(self, kind: str, asked: str, why: str, looked: list[str], notes: list[str] = ()) -> None:
        entry = {"kind": kind, "asked": asked, "missing": True, "why": why, "looked": list(looked)}
        if notes:
            entry["notes"] = list(notes)
        self.record.append(entry)

    def missing(self) -> list[dict]:
        return [e for e in self.record if e.get("missing")]


__all__ = ["ARCHIVE_SUFFIXES", "MAP_SUFFIXES", "Asset", "AssetSearch", "Base", "ModelLocation", "game_paths",
           "is_map_folder"]
