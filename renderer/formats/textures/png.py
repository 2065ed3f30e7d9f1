"""PNG textures, decoded by Pillow after the IHDR dimensions are checked against the limits and
against the file's size (deflate inflates one byte to at most 1032, so a 1 KiB file cannot hold a
16384x4096 image: refused before Pillow allocates it)."""

from __future__ import annotations

from io import BytesIO

import numpy as np
from PIL import Image

from renderer.formats.textures.pillow_bridge import pillow_errors, rgba_array
from renderer.formats.textures.reader import TextureBytes
from renderer.formats.textures.registry import TextureFormat, register_format

MAGIC = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # colour type -> samples per pixel
DEFLATE_RATIO = 1032  # the most bytes deflate can inflate one compressed byte to


def _accept(head: bytes, name: str) -> bool:
    return head.startswith(MAGIC)


def decode_png(data: bytes, name: str) -> np.ndarray:
    tb = TextureBytes(data, name, "PNG")
    _, tag, width, height = tb.unpack(">I4sII", 8, "IHDR chunk")
    if tag != b"IHDR":
        raise tb.error("IHDR chunk", 12, f"first chunk is {tag!r}, not IHDR")
    tb.check_dimensions(width, height, "IHDR width/height", 16)
    depth, colour = tb.unpack(">BB", 24, "IHDR bit depth/colour type")
    row = (width * depth * CHANNELS.get(colour, 1) + 7) // 8 + 1  # + the filter byte
    if height * row > DEFLATE_RATIO * len(tb):
        raise tb.error("IHDR width/height", 16, f"{width}x{height} pixels of {depth}-bit colour type {colour} "
                                                f"need {height * row} bytes inflated, more than deflate can "
                                                f"make of the {len(tb)} bytes of this file")
    with pillow_errors(tb, "image data", len(MAGIC), "PNG decoder"):
        with Image.open(BytesIO(tb.data), formats=["PNG"]) as image:
            image.load()
            return rgba_array(image)


register_format(TextureFormat("PNG", _accept, decode_png))
