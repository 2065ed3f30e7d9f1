"""BLP's paletted pixels: one palette index per pixel, then an alpha plane of 0, 1, 4 or 8 bits.

Shared by BLP1 (content 1) and BLP2 (encoding 1). The palette holds 256 BGRA entries whose alpha
byte is ignored; alpha comes only from the plane after the indices. Packed 1- and 4-bit alpha
values fill each byte from the least significant bit: the first pixel is bit 0 (1-bit) or the low
nibble (4-bit). Values are scaled to 0..255 (1 bit: x255, 4 bits: x17). Alpha depth 0 is opaque.
"""

from __future__ import annotations

import numpy as np

from renderer.formats.textures.reader import TextureBytes

ALPHA_DEPTHS = (0, 1, 4, 8)
PALETTE_BYTES = 256 * 4


def read_palette(tb: TextureBytes, offset: int, field: str) -> np.ndarray:
    """The 256-entry palette at `offset` as a (256, 3) RGB array (the BGRA alpha byte is dropped)."""
    bgra = np.frombuffer(tb.take(offset, PALETTE_BYTES, field), dtype=np.uint8).reshape(256, 4)
    return bgra[:, 2::-1]


def paletted_size(width: int, height: int, alpha_depth: int) -> int:
    pixels = width * height
    return pixels + (pixels * alpha_depth + 7) // 8


def decode_paletted(
    tb: TextureBytes,
    offset: int,
    width: int,
    height: int,
    palette_rgb: np.ndarray,
    alpha_depth: int,
    field: str,
) -> np.ndarray:
    """Decode the index plane and alpha plane at `offset` into (height, width, 4) RGBA."""
    if alpha_depth not in ALPHA_DEPTHS:
        raise tb.error(field, offset, f"alpha depth {alpha_depth} is not one of {ALPHA_DEPTHS}")
    pixels = width * height
    data = tb.take(offset, paletted_size(width, height, alpha_depth), f"{field} (indices and alpha)")
    planes = np.frombuffer(data, dtype=np.uint8)
    out = np.empty((pixels, 4), dtype=np.uint8)
    out[:, :3] = palette_rgb[planes[:pixels]]
    alpha = planes[pixels:]
    if alpha_depth == 0:
        out[:, 3] = 255
    elif alpha_depth == 8:
        out[:, 3] = alpha
    elif alpha_depth == 1:
        out[:, 3] = np.unpackbits(alpha, bitorder="little")[:pixels] * np.uint8(255)
    else:  # 4 bits, low nibble first
        nibbles = np.empty(alpha.size * 2, dtype=np.uint8)
        nibbles[0::2] = alpha & 0x0F
        nibbles[1::2] = alpha >> 4
        out[:, 3] = nibbles[:pixels] * np.uint8(17)
    return out.reshape(height, width, 4)
