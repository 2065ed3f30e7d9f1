"""Mapping a texture path named in a model onto a file under the asset roots, as the game does.

Rules:

- Backslashes and slashes both separate components; every component matches case-insensitively.
  Each directory is listed once, lazily, into a lower-case index (no tree walk up front); the
  index is a snapshot for the resolver's lifetime.
- Search order: for the named extension first, then for each Reforged fallback extension (the rest
  of .blp, .dds, .tga in that order; only when the named extension is one of them):
  the full path under the model's folder, then under each asset root in order; then the basename
  alone in the model's folder, then in each asset root (models imported into maps often have
  flattened paths).
- Where a directory holds several names that match case-insensitively, the exact-case one is
  tried first, then the others in sorted order, and a diagnostic says so.
- Refused, with a diagnostic and no file: empty paths, NUL bytes, absolute paths, drive letters
  (`C:\\`), UNC paths (`\\\\server`), any `..` (or other dots-and-spaces-only) component, `:` in a
  component. A candidate whose real path (symlinks resolved) is inside neither the model's folder
  nor any asset root is skipped with a diagnostic.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from renderer.errors import Diagnostic

EXTENSIONS = (".blp", ".dds", ".tga")
WHERE = "texture path"
_DRIVE = re.compile(r"^[A-Za-z]:")
_SEPARATORS = re.compile(r"[\\/]+")


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
    for part in _SEPARATORS.split(path):
        if part != "." and part and not part.strip(". "):
            return f"component {part!r} is a parent reference or only dots and spaces"
        if ":" in part:
            return f"component {part!r} contains ':' (drive or stream syntax)"
    return None


def _variants(name: str) -> list[str]:
    """The file name with the named extension first, then the Reforged fallback extensions."""
    suffix = PurePosixPath(name).suffix
    if suffix.lower() not in EXTENSIONS:
        return [name]
    stem = name[: -len(suffix)]
    return [name] + [stem + ext for ext in EXTENSIONS if ext != suffix.lower()]


class TextureResolver:
    """Resolves texture paths from one model against its folder and the configured asset roots."""

    def __init__(self, asset_roots: list[Path], model_dir: Path):
        self.asset_roots = [Path(root) for root in asset_roots]
        self.model_dir = Path(model_dir)
        self._listings: dict[str, dict[str, list[str]] | None] = {}
        self._allowed_real: list[Path] | None = None

    def _listing(self, directory: Path) -> dict[str, list[str]] | None:
        """Lower-case name -> actual names in `directory` (exact-case lookups sort first later)."""
        key = os.fspath(directory)
        if key not in self._listings:
            index: dict[str, list[str]] | None = {}
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        index.setdefault(entry.name.lower(), []).append(entry.name)
            except OSError:
                index = None
            if index:
                for names in index.values():
                    names.sort()
            self._listings[key] = index
        return self._listings[key]

    def _matches(self, base: Path, parts: list[str], notes: list[Diagnostic]) -> list[Path]:
        """Files under `base` matching `parts` case-insensitively, best first."""
        found: list[Path] = []
        frontier = [base]
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            following: list[Path] = []
            for directory in frontier:
                names = (self._listing(directory) or {}).get(part.lower(), [])
                if len(names) > 1:
                    notes.append(
                        Diagnostic(
                            WHERE,
                            None,
                            f"{len(names)} entries in {directory} match {part!r} case-insensitively: "
                            f"{names}; trying the exact-case one first, then sorted order",
                        )
                    )
                names = sorted(names, key=lambda n: n != part)
                for name in names:
                    candidate = directory / name
                    if last:
                        if candidate.is_file():
                            found.append(candidate)
                    elif candidate.is_dir():
                        following.append(candidate)
            frontier = following
        return found

    def _allowed(self) -> list[Path]:
        """Real paths of the model folder and the asset roots: where a found file may really be."""
        if self._allowed_real is None:
            self._allowed_real = []
            for base in (self.model_dir, *self.asset_roots):
                try:
                    self._allowed_real.append(base.resolve(strict=True))
                except (OSError, RuntimeError):
                    pass
        return self._allowed_real

    def _inside(self, candidate: Path, notes: list[Diagnostic]) -> bool:
        try:
            real = candidate.resolve(strict=True)
            inside = any(real.is_relative_to(allowed) for allowed in self._allowed())
        except (OSError, RuntimeError):
            real, inside = candidate, False
        if not inside:
            notes.append(
                Diagnostic(
                    WHERE,
                    None,
                    f"refused {candidate}: its real path {real} is outside the model folder and asset roots",
                )
            )
        return inside

    def _find(self, bases: list[Path], parts: list[str], notes: list[Diagnostic]) -> Path | None:
        for base in bases:
            for candidate in self._matches(base, parts, notes):
                if self._inside(candidate, notes):
                    return candidate
        return None

    def resolve(self, path_in_model: str) -> tuple[Path | None, list[Diagnostic]]:
        """The file a model's texture path names, or None; plus diagnostics about the lookup."""
        why = refusal(path_in_model)
        if why is not None:
            return None, [Diagnostic(WHERE, None, f"refused {path_in_model!r}: {why}")]
        parts = [part for part in _SEPARATORS.split(path_in_model) if part not in ("", ".")]
        if not parts:
            return None, [Diagnostic(WHERE, None, f"refused {path_in_model!r}: it names no file")]
        notes: list[Diagnostic] = []
        bases = [self.model_dir, *self.asset_roots]
        for variant in _variants(parts[-1]):
            attempts = [("", [*parts[:-1], variant])]
            if len(parts) > 1:
                attempts.append(("by basename ", [variant]))
            for how, wanted in attempts:
                found = self._find(bases, wanted, notes)
                if found is None:
                    continue
                if variant != parts[-1]:
                    how += f"with extension fallback to {PurePosixPath(variant).suffix} "
                if how:
                    notes.append(Diagnostic(WHERE, None, f"{path_in_model!r} resolved {how}to {found}"))
                return found, notes
        tried = ", ".join(PurePosixPath(v).suffix or "(none)" for v in _variants(parts[-1]))
        notes.append(
            Diagnostic(
                WHERE,
                None,
                f"{path_in_model!r} not found in the model folder {self.model_dir} or "
                f"{len(self.asset_roots)} asset root(s) (extensions tried: {tried})",
            )
        )
        return None, notes
