"""Warcraft III text models (MDL): the same Model as MDX, read and written as text.

`read_mdl(text)` / `read_mdl_bytes(data, name)` parse (a file: `renderer.formats.load_model`),
`write_mdl(model)` / `save_mdl(model, path)` write.
MDX -> MDL -> MDX keeps every field and every float32 bit (see the module docs of `fields`,
`materials`, `geosets` and `nodes` for the syntax of each block, including the extensions this
writer needs for exactness: `Flags n`, `SelectionFlags n`, `LightType n`, explicit face/group lists).
"""

from __future__ import annotations

from renderer.files import atomic_write

from .read import read_mdl
from .write import write_mdl


def save_mdl(model, path) -> None:
    """Write atomically; names that are not UTF-8 go back to their original bytes."""
    atomic_write(path, write_mdl(model).encode("utf-8", "surrogateescape"))


__all__ = [ "read_mdl", "save_mdl", "write_mdl"]
