"""Warcraft III binary models (MDX), versions 800 to 1200; newer versions load what is known."""

from __future__ import annotations

from renderer.files import atomic_write

from .read import chunk_table, read_mdx
from .write import write_mdx


def save_mdx(model, path) -> None:
    """Write atomically: a crash never leaves a half-written model behind."""
    atomic_write(path, write_mdx(model))


__all__ = ["chunk_table", "read_mdx", "save_mdx", "write_mdx"]
