"""Uncompressed pixels described by per-channel bit masks (DDS "RGB", "LUMINANCE", "ALPHA").

Each pixel is a little-endian integer of 8, 16, 24 or 32 bits; each channel is the bits under its
mask, scaled to 0..255 with rounding: round(v * 255 / max), max being the mask shifted down.
A channel without a mask is 0 (colour) or 255 (alpha). Vectorised over all pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from renderer.formats.textures.reader import TextureBytes


@dataclass(frozen=True)
class ChannelMasks:
    bits: int
    red: int
    green: int
    blue: int
    alpha: int
    luminance: bool = False  # the red mask holds grey, copied to R, G and B

    def data_size(self, width: int, height: int) -> int:
        return width * height * (self.bits // 8)


def _check_masks(tb: TextureBytes, masks: ChannelMasks, field: str, offset: int) -> None:
    if masks.bits not in (8, 16, 24, 32):
        raise tb.error(field, offset, f"bit count {masks.bits} is not 8, 16, 24 or 32")
    for mask in (masks.red, masks.green, masks.blue, masks.alpha):
        if mask >> masks.bits:
            raise tb.error(field, offset, f"mask {mask:#x} has bits beyond the {masks.bits}-bit pixel")
        low = mask & -mask
        if mask and (mask + low) & mask:
            raise tb.error(field, offset, f"mask {mask:#x} is not one contiguous run of bits")


def _channel(values: np.ndarray, mask: int) -> np.ndarray:
    shift = (mask & -mask).bit_length() - 1
    top = mask >> shift
    v = (values & np.uint64(mask)) >> np.uint64(shift)
    return ((v * np.uint64(255) + np.uint64(top // 2)) // np.uint64(top)).astype(np.uint8)


def decode_masked(
    tb: TextureBytes, offset: int, width: int, height: int, masks: ChannelMasks, field: str
) -> np.ndarray:
    """Decode tightly packed rows of mask-described pixels at `offset` into RGBA."""
    _check_masks(tb, masks, field, offset)
    step = masks.bits // 8
    raw = np.frombuffer(tb.take(offset, masks.data_size(width, height), field), dtype=np.uint8)
    raw = raw.reshape(-1, step).astype(np.uint64)
    values = np.zeros(raw.shape[0], dtype=np.uint64)
    for i in range(step):
        values |= raw[:, i] << np.uint64(8 * i)
    out = np.zeros((width * height, 4), dtype=np.uint8)
    if masks.luminance:
        if masks.red:
            out[:, :3] = _channel(values, masks.red)[:, None]
    else:
        for i, mask in enumerate((masks.red, masks.green, masks.blue)):
            if mask:
                out[:, i] = _channel(values, mask)
    out[:, 3] = _channel(values, masks.alpha) if masks.alpha else 255
    return out.reshape(height, width, 4)
