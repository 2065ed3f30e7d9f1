"""Warcraft III binary models (MDX), versions 800 to 1200; newer versions load what is known."""

from .read import load_mdx, read_mdx
from .write import write_mdx

__all__ = ["load_mdx", "read_mdx", "write_mdx"]
