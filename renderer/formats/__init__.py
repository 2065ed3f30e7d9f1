"""Model file formats. Each format module registers its loader here by file extension.

`load_model(path)` picks the loader by extension (falling back to the file's magic bytes), so the
rest of the code never switches over formats.
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path, PurePosixPath

from renderer.assets.mpq import entry_name
from renderer.assets.search import ModelLocation, split_source
from renderer.assets.sources import read_source, source_name
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


# Entry extension -> "module:function" reading a model from bytes (data, path, strict=..., **options).
READERS: dict[str, str] = {
    ".mdx": "renderer.formats.mdx:read_mdx",
    ".mdl": "renderer.formats.mdl.read:read_mdl_bytes",
}


def load_model_source(source: str | Path, strict: bool = False, listfile=None, **options):
    """Load a model from a file path or an `ARCHIVE:ENTRY` source into the neutral Model."""
    split = split_source(source)
    if split is None:
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
