"""PNG textures, decoded by Pillow after the IHDR dimensions are checked against the limits."""

from __future__ import annotations

from io import BytesIO

import numpy as np
from PIL import Image

from renderer.formats.textures.pillow_bridge import pillow_errors, rgba_array
from renderer.formats.textures.reader import TextureBytes
from renderer.formats.textures.registry import TextureFormat, register_format

MAGIC = b"\x89PNG\r\n\x1a\n"


def _accept(head: bytes, name: str) -> bool:
    return head.startswith(MAGIC)


def decode_png(data: bytes, name: str) -> np.ndarray:
    tb = TextureBytes(data, name, "PNG")
    _, tag, width, height = tb.unpack(">I4sII", 8, "IHDR chunk")
    if tag != b"IHDR":
        raise tb.error("IHDR chunk", 12, f"first chunk is {tag!r}, not IHDR")
    tb.check_dimensions(width, height, "IHDR width/height", 16)
    with pillow_errors(tb, "image data", len(MAGIC), "PNG decoder"):
        with Image.open(BytesIO(tb.data), formats=["PNG"]) as image:
            image.load()
            return rgba_array(image)


register_format(TextureFormat("PNG", _accept, decode_png))
