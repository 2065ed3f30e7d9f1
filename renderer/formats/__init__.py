"""Model file formats: one contract, one registry.

A format is one row of `FORMATS` (`ModelFormat`: extensions, reader, writer, magic), and its reader
has one signature, `read(data, name, *, strict=False, resolver=None, **its own options) -> Model`
(an option a reader does not have is a TypeError, never ignored):

- `data`: the file's bytes. Where they come from (a folder, an archive entry, an object store, a
  future Halo cache file) is never a format's business: `load_model` reads a file or an
  `ARCHIVE:ENTRY` source (renderer.assets.sources.read_source) and hands the bytes over.
- `name`: where they came from (a path, `maps/foo.w3x:war3mapImported/x.mdx`, or any label): it
  names the file in errors and is the model's location (its context's, which the asset search
  starts from).
- `resolver`: answers what the file refers to while it loads. Halo model tags name shader and bitmap
  tags: by default a `renderer.formats.halo.TagRoot` over the tag root (the `tag_root` option, else
  the folder named `tags` above `name`); a worker that cannot see that folder gets the answers a
  coordinator pinned for it (`renderer.assets.pins.Pins.tags`). MDX and MDL refer to nothing at
  load time (their textures are looked up when a frame is drawn, by the asset search): they take
  the resolver and leave it unused.

A format whose reader finds what the model draws while it loads (Halo: its bitmap tags) also has a
loader: the reader's signature, returning `(Model, texture source)` (renderer.context).

`read(data, name)` and `load(source)` pick the reader by the name's extension, else by the bytes'
magic, so the rest of the code never switches over formats, and return `Loaded(model, context)`:
the neutral model, and where it came from (its location and the sha256 of its bytes) with how its
inputs are found (the texture source), which the renderer takes beside the model
(renderer.context). `read_model` and `load_model` return the model alone, for callers that read the
data and draw nothing, or draw a format whose context its path names (`context_of`).
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from renderer.assets.search import ModelLocation, split_source
from renderer.assets.sources import read_source, source_name
from renderer.context import Loaded, ModelContext
from renderer.errors import FormatError


@dataclass(frozen=True)
class ModelFormat:
    """One model format: its extensions, its reader (the contract above) and writer as
    "module:function" (imported only when used), the magic its files start with, if any, and its
    loader when its reader finds the model's textures while it loads (the module docstring)."""

    extensions: tuple[str, ...]
    reader: str
    writer: str | None = None
    magic: bytes | None = None
    loader: str | None = None
    name: str = ""  # the `Model.format` its reader sets


FORMATS = (
    ModelFormat((".mdx",), "renderer.formats.mdx:read_mdx", "renderer.formats.mdx:save_mdx", b"MDLX", name="mdx"),
    ModelFormat((".mdl",), "renderer.formats.mdl.read:read_mdl_bytes", "renderer.formats.mdl:save_mdl", name="mdl"),
    # Halo 1 model tags: Xbox .model, PC .gbxmodel (no magic at offset 0)
    ModelFormat((".model", ".gbxmodel"), "renderer.formats.halo:read_halo_model",
                loader="renderer.formats.halo:load_halo_model", name="halo"),
)
READERS: dict[str, str] = {ext: f.reader for f in FORMATS for ext in f.extensions}
LOADERS: dict[str, str] = {ext: f.loader for f in FORMATS if f.loader for ext in f.extensions}
WRITERS: dict[str, str] = {ext: f.writer for f in FORMATS if f.writer for ext in f.extensions}
MAGIC: dict[bytes, str] = {f.magic: f.extensions[0] for f in FORMATS if f.magic}


def _resolve(spec: str):
    mod, fn = spec.split(":")
    return getattr(importlib.import_module(mod), fn)


def format_of(name: str, data: bytes = b"") -> str:
    """The registered extension of a model named `name` with these bytes (its extension, else its magic)."""
    ext = PurePosixPath(str(name).replace("\\", "/")).suffix.lower()
    if ext in READERS:
        return ext
    if bytes(data[:4]) in MAGIC:
        return MAGIC[bytes(data[:4])]
    known = ", ".join(sorted(READERS))
    raise FormatError(str(name), "", 0, f"unknown model format (extension {ext!r}; known: {known})")


def source_label(source: str | Path) -> str:
    """The name a model read from `source` carries: a path as given, an archive entry as
    `ARCHIVE:entry/with/slashes` (renderer.assets.sources.source_name)."""
    split = split_source(source)
    return source_name(*split) if split is not None else str(Path(source))


def load(source: str | Path, strict: bool = False, listfile=None, resolver=None, **options) -> Loaded:
    """Load a model file, or an archive entry `maps/foo.w3x:war3mapImported/x.mdx`: the neutral Model
    and its context (`read`); FormatError (naming the file) when it cannot be read or parsed."""
    return read(read_source(source, listfile), source_label(source), strict=strict, resolver=resolver, **options)


def read(data: bytes, name: str, strict: bool = False, resolver=None, **options) -> Loaded:
    """The neutral Model of a model file's bytes, `name` saying where they came from (see the module
    docstring), and its context: that place and the bytes' sha256, and the texture source of a format
    whose reader finds the textures (renderer.context.ModelContext)."""
    ext = format_of(name, data)
    if ext in LOADERS:
        model, source = _resolve(LOADERS[ext])(data, name, strict=strict, resolver=resolver, **options)
    else:
        model, source = _resolve(READERS[ext])(data, name, strict=strict, resolver=resolver, **options), None
    where = ModelLocation.from_path(name)
    location = ModelLocation(where.folder, where.archive, where.entry, hashlib.sha256(data).hexdigest())
    return Loaded(model, ModelContext(location, texture_source=source))


def load_model(source: str | Path, strict: bool = False, listfile=None, resolver=None, **options):
    """The neutral Model of a model file or archive entry (`load`'s model; its context: `load`)."""
    return load(source, strict, listfile, resolver, **options).model


def read_model(data: bytes, name: str, strict: bool = False, resolver=None, **options):
    """The neutral Model of a model file's bytes (`read`'s model; its context: `read`)."""
    return read(data, name, strict, resolver, **options).model


def context_of(model) -> ModelContext:
    """The context of a model handed over without one (read with `load_model`, or built in memory):
    the location its `path` names (the asset search starts there; a file's digest is read from it
    when a frame needs it), no texture source, no pins. A model of a format whose textures its loader
    finds (Halo) has no context to derive: ValueError, saying to pass the one `load` returned, rather
    than drawing flat colours where its bitmaps are."""
    if model.format in {f.name for f in FORMATS if f.loader}:
        raise ValueError(f"{model.path or model.name or 'this model'}: a {model.format} model's textures are"
                         " found when it loads; pass the context renderer.formats.load (or read) returned with it")
    return ModelContext.from_path(model.path)


def save_model(model, path: str | Path) -> None:
    """Write a Model in the format the path's extension names."""
    path = Path(path)
    ext = path.suffix.lower()
    if ext not in WRITERS:
        raise ValueError(f"cannot write {ext!r} files; writable: {', '.join(sorted(WRITERS))}")
    _resolve(WRITERS[ext])(model, path)
