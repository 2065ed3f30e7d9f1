"""Model file formats. Each format module registers its loader here by file extension.

`load_model(path)` picks the loader by extension (falling back to the file's magic bytes), so the
rest of the code never switches over formats.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from renderer.errors import FormatError

# extension -> "module:function"; the loader is imported only when used.
LOADERS: dict[str, str] = {
    ".mdx": "renderer.formats.mdx:load_mdx",
    ".mdl": "renderer.formats.mdl:load_mdl",
    ".model": "renderer.formats.halo:load_halo_model",  # Halo 1 Xbox model tag (no magic at offset 0)
    ".gbxmodel": "renderer.formats.halo:load_halo_model",  # Halo 1 PC model tag
}
WRITERS: dict[str, str] = {
    ".mdx": "renderer.formats.mdx:save_mdx",
    ".mdl": "renderer.formats.mdl:save_mdl",
}
MAGIC: dict[bytes, str] = {b"MDLX": ".mdx"}


def register(ext: str, loader: str, writer: str | None = None, magic: bytes | None = None) -> None:
    LOADERS[ext.lower()] = loader
    if writer:
        WRITERS[ext.lower()] = writer
    if magic:
        MAGIC[magic] = ext.lower()


def _resolve(spec: str):
    mod, fn = spec.split(":")
    return getattr(importlib.import_module(mod), fn)


def format_of(path: Path) -> str:
    ext = path.suffix.lower()
    if ext in LOADERS:
        return ext
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise FormatError(str(path), "", None, f"cannot read file: {e.strerror or e}") from e
    if head in MAGIC:
        return MAGIC[head]
    known = ", ".join(sorted(LOADERS))
    raise FormatError(str(path), "", 0, f"unknown model format (extension {ext!r}; known: {known})")


def load_model(path: str | Path, strict: bool = False, **options):
    """Load any supported model file, or an archive entry `maps/foo.w3x:war3mapImported/x.mdx`
    (renderer.assets.sources), into the neutral Model."""
    from renderer.assets.sources import load_model_source, split_source

    if split_source(path) is not None:
        return load_model_source(path, strict=strict, **options)
    path = Path(path)
    return _resolve(LOADERS[format_of(path)])(path, strict=strict, **options)


def save_model(model, path: str | Path) -> None:
    """Write a Model in the format the path's extension names."""
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in WRITERS:
        raise ValueError(f"cannot write {ext!r} files; writable: {', '.join(sorted(WRITERS))}")
    _resolve(WRITERS[ext])(model, path)
