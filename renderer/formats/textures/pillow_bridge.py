"""The two ways decoders use Pillow: its C block decoder (BC1-BC7) on bytes a decoder has already
validated, and its image plugins (PNG, TGA, JPEG streams), with every Pillow exception turned into
a `FormatError` that names our file, field and offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from PIL import Image

from renderer.errors import FormatError
from renderer.formats.textures.reader import TextureBytes


@contextmanager
def pillow_errors(tb: TextureBytes, field: str, offset: int | None, what: str) -> Iterator[None]:
    """Run Pillow code; any exception it raises becomes a `FormatError` for `field` at `offset`
    (but a MemoryError stays one: farm.run.budget turns it into the frame's budget failure)."""
    try:
        yield
    except (FormatError, MemoryError):  # a MemoryError is the worker's memory budget, not bad input
        raise
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, EOFError, ...
        raise tb.error(field, offset, f"{what} failed: {type(exc).__name__}: {exc}") from exc


def rgba_array(image: Image.Image) -> np.ndarray:
    """A new (H, W, 4) uint8 array from a Pillow image; grey is replicated, missing alpha is 255."""
    if image.mode == "RGBA":
        return np.array(image, dtype=np.uint8)
    if image.mode in ("RGB", "L"):
        pixels = np.asarray(image, dtype=np.uint8)
        out = np.empty((image.height, image.width, 4), dtype=np.uint8)
        out[..., :3] = pixels[..., None] if pixels.ndim == 2 else pixels
        out[..., 3] = 255
        return out
    return np.array(image.convert("RGBA"), dtype=np.uint8)


@dataclass(frozen=True)
class BlockFormat:
    """A 4x4 block-compressed format as Pillow's C "bcn" decoder knows it."""

    name: str
    block_bytes: int
    pillow_n: int
    pillow_format: str
    pillow_mode: str

    def data_size(self, width: int, height: int) -> int:
        return ((width + 3) // 4) * ((height + 3) // 4) * self.block_bytes


BC1 = BlockFormat("DXT1/BC1", 8, 1, "DXT1", "RGBA")
BC2 = BlockFormat("DXT3/BC2", 16, 2, "DXT3", "RGBA")
BC3 = BlockFormat("DXT5/BC3", 16, 3, "DXT5", "RGBA")
BC4 = BlockFormat("ATI1/BC4", 8, 4, "BC4", "L")
BC5 = BlockFormat("ATI2/BC5", 16, 5, "BC5", "RGB")
BC5_SIGNED = BlockFormat("BC5 signed", 16, 5, "BC5S", "RGB")
BC6H = BlockFormat("BC6H unsigned", 16, 6, "BC6H", "RGB")
BC6H_SIGNED = BlockFormat("BC6H signed", 16, 6, "BC6HS", "RGB")
BC7 = BlockFormat("BC7", 16, 7, "BC7", "RGBA")


def decode_blocks(tb: TextureBytes, offset: int, width: int, height: int, fmt: BlockFormat, field: str) -> np.ndarray:
    """Decode the top level of block-compressed data at `offset` (checked to be all present)."""
    size = fmt.data_size(width, height)
    blocks = tb.take(offset, size, f"{field} ({fmt.name}, {width}x{height})")
    with pillow_errors(tb, field, offset, f"{fmt.name} block decoder"):
        image = Image.frombytes(fmt.pillow_mode, (width, height), blocks, "bcn", fmt.pillow_n, fmt.pillow_format)
    return rgba_array(image)
