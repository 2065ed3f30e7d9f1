"""BLP1 (Warcraft III) and BLP2 (World of Warcraft) textures: the top mip level as RGBA, and the
stored mip chain (`decode_blp_chain`, rules in `mips`).

Header layouts (little-endian):

    BLP1  0 "BLP1"  4 u32 content (0 JPEG, 1 paletted)  8 u32 alphaBits  12 u32 width
          16 u32 height  20 u32 extra  24 u32 hasMipmaps  28 u32[16] mip offsets  92 u32[16] mip sizes
          156 JPEG: u32 shared header size, header bytes from 160 | paletted: 256 BGRA palette
    BLP2  0 "BLP2"  4 u32 type (0 JPEG, 1 direct)  8 u8 encoding (1 paletted, 2 DXT, 3 BGRA)
          9 u8 alphaDepth  10 u8 alphaEncoding (0 DXT1, 1 DXT3, 7 DXT5)  11 u8 hasMips
          12 u32 width  16 u32 height  20 u32[16] mip offsets  84 u32[16] mip sizes  148 palette

BLP1 JPEG content is the shared header followed by the mip's bytes: a 4-component JPEG whose
components are stored raw as B, G, R, A (no Adobe inversion, no colour transform). We let Pillow's
JPEG decoder return the raw components (the rawmode Pillow's own BLP plugin uses) and reorder
them; Pillow's plugin drops the alpha component and ignores BLP1's separate alpha plane for
paletted images, and decodes DXT in Python per pixel, so only its JPEG and block decoders are used.
With alphaBits 0 the image is opaque; any other alphaBits value keeps the JPEG's fourth component.
The JPEG frame must have exactly the header's size (so a corrupt frame cannot make us decode a
huge image). A 3-component JPEG (not written by Blizzard's tools) is taken as B, G, R after
Pillow's YCbCr conversion, and a greyscale one as grey; both are opaque. These two are guesses.

Mip levels: the file stores as many levels as leading slots with a non-zero offset and size (none
past the first when hasMipmaps is 0). Level k is decoded like level 0 at max(1, w >> k) x
max(1, h >> k) (JPEG levels share the header). The chain is used when it has more than one level,
no two slots share an offset ("fake" mipmaps) and both sides are powers of two; otherwise level 0
is drawn without mipmapping (`mips.NONE`), as the viewer does.
"""

from __future__ import annotations

from io import BytesIO

import numpy as np
from PIL import Image

from renderer.errors import FormatError
from renderer.formats.textures import mips
from renderer.formats.textures.paletted import decode_paletted, read_palette
from renderer.formats.textures.pillow_bridge import BC1, BC2, BC3, decode_blocks, pillow_errors
from renderer.formats.textures.reader import TextureBytes
from renderer.formats.textures.registry import TextureFormat, register_format

BLP1_PALETTE = 156
BLP1_JPEG_HEADER_SIZE = 156
BLP1_JPEG_HEADER = 160
BLP2_PALETTE = 148
BLP2_DXT = {0: BC1, 1: BC2, 7: BC3}


def _accept(head: bytes, name: str) -> bool:
    return head[:4] in (b"BLP0", b"BLP1", b"BLP2")


def _mip(tb: TextureBytes, table: int, level: int = 0) -> tuple[int, int]:
    """Offset and size of mip `level` from the two 16-entry tables starting at `table`."""
    return tb.u32(table + 4 * level, f"mip {level} offset"), tb.u32(table + 64 + 4 * level, f"mip {level} size")


def _stored_levels(tb: TextureBytes, table: int, has_mips: bool) -> tuple[int, bool]:
    """(levels the file stores, whether two slots share an offset)."""
    if not has_mips:
        return 1, False
    count = 0
    for k in range(16):
        offset, size = _mip(tb, table, k)
        if offset == 0 or size == 0:
            break
        count += 1
    offsets = [_mip(tb, table, k)[0] for k in range(16)]
    used = [o for o in offsets if o > 0]
    return max(count, 1), len(set(used)) != len(used)


def _decode_blp1_jpeg(
    tb: TextureBytes, width: int, height: int, alpha_bits: int, mip_offset: int, mip_size: int, level: int = 0
) -> np.ndarray:
    header_size = tb.u32(BLP1_JPEG_HEADER_SIZE, "JPEG header size")
    header = tb.take(BLP1_JPEG_HEADER, header_size, "shared JPEG header")
    if mip_size == 0:
        raise tb.error(f"mip {level} size", 92 + 4 * level, f"mip level {level} has size 0")
    body = tb.take(mip_offset, mip_size, f"mip {level} JPEG data")
    field = f"mip {level} JPEG data"
    with pillow_errors(tb, field, mip_offset, "JPEG decoder"):
        with Image.open(BytesIO(header + body), formats=["JPEG"]) as jpeg:
            if jpeg.size != (width, height):
                raise tb.error(
                    field, mip_offset, f"JPEG frame is {jpeg.size[0]}x{jpeg.size[1]}, header says {width}x{height}"
                )
            if jpeg.mode == "CMYK":  # raw components, not Adobe-inverted CMYK
                jpeg.tile = [tile._replace(args=("CMYK", *tile.args[1:])) for tile in jpeg.tile]
            jpeg.load()
            raw = np.asarray(jpeg, dtype=np.uint8)
    out = np.empty((height, width, 4), dtype=np.uint8)
    if raw.ndim == 2:  # greyscale JPEG
        out[..., :3] = raw[..., None]
        out[..., 3] = 255
    else:  # components are B, G, R[, A]
        out[..., :3] = raw[..., 2::-1]
        out[..., 3] = raw[..., 3] if raw.shape[2] == 4 else 255
    if alpha_bits == 0:
        out[..., 3] = 255
    return out


def _decode_blp1(tb: TextureBytes, level: int = 0) -> np.ndarray:
    content, alpha_bits, width, height = tb.unpack("<4I", 4, "header")
    tb.check_dimensions(width, height, "width/height", 12)
    width, height = mips.level_size(width, height, level)
    mip_offset, mip_size = _mip(tb, 28, level)
    if content == 0:
        return _decode_blp1_jpeg(tb, width, height, alpha_bits, mip_offset, mip_size, level)
    if content == 1:
        palette = read_palette(tb, BLP1_PALETTE, "palette")
        return decode_paletted(tb, mip_offset, width, height, palette, alpha_bits, f"mip {level} paletted data")
    raise tb.error("content", 4, f"content {content} is neither 0 (JPEG) nor 1 (paletted)")


def _decode_blp2(tb: TextureBytes, level: int = 0) -> np.ndarray:
    kind = tb.u32(4, "type")
    encoding, alpha_depth, alpha_encoding = tb.unpack("<3B", 8, "encoding")
    width, height = tb.unpack("<2I", 12, "width/height")
    tb.check_dimensions(width, height, "width/height", 12)
    width, height = mips.level_size(width, height, level)
    mip_offset, _ = _mip(tb, 20, level)
    if kind != 1:
        raise tb.error("type", 4, f"type {kind} is not supported (only 1, direct pixels)")
    if encoding == 1:
        palette = read_palette(tb, BLP2_PALETTE, "palette")
        return decode_paletted(tb, mip_offset, width, height, palette, alpha_depth, f"mip {level} paletted data")
    if encoding == 2:
        fmt = BLP2_DXT.get(alpha_encoding)
        if fmt is None:
            raise tb.error(
                "alpha encoding", 10, f"DXT alpha encoding {alpha_encoding} is not 0 (DXT1), 1 (DXT3) or 7 (DXT5)"
            )
        out = decode_blocks(tb, mip_offset, width, height, fmt, f"mip {level} DXT data")
        if fmt is BC1 and alpha_depth == 0:  # opaque DXT1: the 3-colour "transparent" index is black
            out[..., 3] = 255
        return out
    if encoding == 3:
        bgra = tb.take(mip_offset, width * height * 4, f"mip {level} BGRA data")
        out = np.frombuffer(bgra, dtype=np.uint8).reshape(height, width, 4)[..., [2, 1, 0, 3]]
        if alpha_depth == 0:
            out[..., 3] = 255
        return out
    raise tb.error("encoding", 8, f"encoding {encoding} is not 1 (paletted), 2 (DXT) or 3 (BGRA)")


def decode_blp(data: bytes, name: str) -> np.ndarray:
    magic = data[:4]
    if magic == b"BLP1":
        return _decode_blp1(TextureBytes(data, name, "BLP1"))
    if magic == b"BLP2":
        return _decode_blp2(TextureBytes(data, name, "BLP2"))
    raise FormatError(name, "BLP0 header", 0, "BLP0 keeps its mip levels in separate files; not supported")


def decode_blp_chain(data: bytes, name: str) -> mips.MipChain:
    """Level 0 and the stored levels the renderer uploads (see the module docstring)."""
    magic = data[:4]
    if magic not in (b"BLP1", b"BLP2"):
        return mips.MipChain((decode_blp(data, name),), mips.NONE)
    blp1 = magic == b"BLP1"
    tb = TextureBytes(data, name, "BLP1" if blp1 else "BLP2")
    decode = _decode_blp1 if blp1 else _decode_blp2
    top = decode(tb)
    has_mips = tb.u32(24, "hasMipmaps") != 0 if blp1 else tb.u8(11, "hasMips") != 0
    count, fake = _stored_levels(tb, 28 if blp1 else 20, has_mips)
    h, w = top.shape[:2]
    if count <= 1 or fake or not (mips.is_power_of_two(w) and mips.is_power_of_two(h)):
        return mips.MipChain((top,), mips.NONE)
    return mips.stored_chain(top, count, lambda k: decode(tb, k))


register_format(TextureFormat("BLP", _accept, decode_blp, decode_chain=decode_blp_chain))
