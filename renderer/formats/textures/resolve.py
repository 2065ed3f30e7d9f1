"""The game's rules for the texture paths a model names: `refusal` (paths never looked up) and
`extension_variants` (the Reforged extension fallback), used by the one asset search
(`renderer.assets.search`, which adds the folders above the model, archives and game data and
records every lookup); and `TextureResolver`, a path-only view of that search over a model folder
and asset root folders.

Rules:

- Backslashes and slashes both separate components; every component matches case-insensitively.
  Each directory is listed once, lazily, into a lower-case index (no tree walk up front); the
  index is a snapshot for the search's lifetime (`renderer.assets.trees.AssetFolder`).
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

from pathlib import Path

from renderer.assets.paths import EXTENSIONS, SEPARATORS, WHERE, extension_variants, refusal
from renderer.assets.search import AssetSearch, Base
from renderer.assets.trees import AssetFolder
from renderer.errors import Diagnostic

__all__ = ["EXTENSIONS", "SEPARATORS", "WHERE", "TextureResolver", "extension_variants", "refusal"]


class TextureResolver:
    """Resolves texture paths from one model against its folder and the given asset roots (folders),
    for callers that want a path: the matching is `renderer.assets.search.AssetSearch`'s, over
    exactly these bases (no folders above the model, no archives, no game data). New code should
    use `AssetSearch.for_model`, which also records every lookup."""

    def __init__(self, asset_roots: list[Path], model_dir: Path):
        self.asset_roots = [Path(root) for root in asset_roots]
        self.model_dir = Path(model_dir)
        stores = [AssetFolder(d) for d in (self.model_dir, *self.asset_roots)]
        self._search = AssetSearch([Base(st, (), "model" if i == 0 else "asset root") for i, st in enumerate(stores)],
                                   [st.real for st in stores if st.real is not None])

    def resolve(self, path_in_model: str) -> tuple[Path | None, list[Diagnostic]]:
        """The file a model's texture path names, or None; plus diagnostics about the lookup."""
        hit, how, notes = self._search.locate(path_in_model)
        out = [Diagnostic(WHERE, None, n) for n in notes]
        if hit is not None:
            if how != "exact":  # "basename", "exact, extension fallback to .dds", "basename, extension ..."
                base, _, fallback = how.partition(", ")
                phrase = " ".join(filter(None, ("by basename" if base == "basename" else "",
                                                f"with {fallback}" if fallback else "")))
                out.append(Diagnostic(WHERE, None, f"{path_in_model!r} resolved {phrase} to {hit[0]}"))
            return Path(hit[0]), out
        if how.startswith("refused"):
            return None, [Diagnostic(WHERE, None, f"refused {path_in_model!r}: {how.removeprefix('refused: ')}")]
        out.append(Diagnostic(WHERE, None, f"{path_in_model!r} {how} in the model folder {self.model_dir} or "
                                           f"{len(self.asset_roots)} asset root(s)"))
        return None, out
