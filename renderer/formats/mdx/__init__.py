"""Warcraft III binary models (MDX), versions 800 to 1200; newer versions load what is known."""

from __future__ import annotations

import os
from pathlib import Path

from .read import chunk_table, load_mdx, read_mdx
from .write import write_mdx


def save_mdx(model, path) -> None:
    """Write atomically: a crash never leaves a half-written model behind."""
    path = Path(path)
    data = write_mdx(model)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


__all__ = ["chunk_table", "load_mdx", "read_mdx", "save_mdx", "write_mdx"]
