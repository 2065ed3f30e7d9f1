"""TGA textures: the header is checked here, the pixels are decoded by Pillow.

TGA has no magic number, so it registers as a fallback: it is chosen for a `.tga` name, or for any
unrecognised bytes whose 18-byte header is plausible. Header (little-endian): 0 u8 ID length,
1 u8 colour-map type, 2 u8 image type, 3 u16 first map entry, 5 u16 map length, 7 u8 map entry
bits, 12 u16 width, 14 u16 height, 16 u8 pixel bits, 17 u8 descriptor (origin, alpha bits).
Sizes are checked against the bytes present before Pillow allocates the image: raw pixels must all
be there, and RLE data must have at least one packet (a header byte and a pixel) per 128 pixels.
"""

from __future__ import annotations

from io import BytesIO

import numpy as np
from PIL import Image, TgaImagePlugin  # noqa: F401 - see below

from renderer.formats.textures.pillow_bridge import pillow_errors, rgba_array
from renderer.formats.textures.reader import TextureBytes
from renderer.formats.textures.registry import TextureFormat, register_format

# Importing TgaImagePlugin registers TGA, so Image.open(..., formats=["TGA"]) finds it; otherwise
# Pillow's Image.init() imports every plugin it has on the first TGA (about 50 ms per process).
HEADER = 18
# image type -> pixel depths Pillow decodes for it
IMAGE_TYPES = {1: (8,), 2: (16, 24, 32), 3: (8, 16), 9: (8,), 10: (16, 24, 32), 11: (8, 16)}
MAP_DEPTHS = (16, 24, 32)
RLE_PIXELS_PER_PACKET = 128


def _plausible(head: bytes) -> bool:
    if len(head) < HEADER:
        return False
    width, height = int.from_bytes(head[12:14], "little"), int.from_bytes(head[14:16], "little")
    return (
        head[1] in (0, 1)
        and head[16] in IMAGE_TYPES.get(head[2], ())
        and (head[1] == 1) == (head[2] in (1, 9))
        and width > 0
        and height > 0
    )


def _accept(head: bytes, name: str) -> bool:
    return name.lower().endswith(".tga") or _plausible(head)


def decode_tga(data: bytes, name: str) -> np.ndarray:
    tb = TextureBytes(data, name, "TGA")
    id_length, map_type, image_type = tb.unpack("<3B", 0, "header")
    _, map_length, map_depth = tb.unpack("<HHB", 3, "colour map spec")
    width, height, depth, _descriptor = tb.unpack("<HHBB", 12, "image spec")
    if image_type not in IMAGE_TYPES:
        raise tb.error("image type", 2, f"image type {image_type} is not one of {sorted(IMAGE_TYPES)}")
    if depth not in IMAGE_TYPES[image_type]:
        raise tb.error("pixel depth", 16, f"{depth} bits is not supported for image type {image_type}")
    if map_type not in (0, 1) or (map_type == 1) != (image_type in (1, 9)):
        raise tb.error("colour-map type", 1, f"colour-map type {map_type} does not fit image type {image_type}")
    if map_type == 1 and map_depth not in MAP_DEPTHS:
        raise tb.error("colour-map entry bits", 7, f"{map_depth} bits is not one of {MAP_DEPTHS}")
    tb.check_dimensions(width, height, "width/height", 12)
    map_bytes = map_length * ((map_depth + 7) // 8) if map_type else 0
    pixels_at = HEADER + id_length + map_bytes
    tb.need(HEADER, id_length + map_bytes, "image ID and colour map")
    pixel_bytes = (depth + 7) // 8
    if not image_type & 8:
        tb.need(pixels_at, width * height * pixel_bytes, "pixel data")
    elif width * height > RLE_PIXELS_PER_PACKET * max(0, len(tb) - pixels_at) // (1 + pixel_bytes):
        # each RLE packet is a header byte and at least one pixel, and stands for at most 128 pixels
        raise tb.error("pixel data", pixels_at, f"{len(tb) - pixels_at} bytes of RLE packets cannot hold "
                                                f"{width}x{height} pixels")
    with pillow_errors(tb, "pixel data", pixels_at, "TGA decoder"):
        with Image.open(BytesIO(tb.data), formats=["TGA"]) as image:
            if not image.tile:
                raise tb.error("image spec", 12, "Pillow has no decoder for this TGA layout")
            image.load()
            return rgba_array(image)


register_format(TextureFormat("TGA", _accept, decode_tga, fallback=True))
