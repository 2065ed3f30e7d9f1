"""DDS textures: the top mip level (of the first face or array slice) as RGBA.

We parse and check the header ourselves, so every size is validated against the bytes present
before anything is decoded; block-compressed data then goes to Pillow's C decoder (BC1-BC7,
ATI1/ATI2), and mask-described uncompressed pixels to `channel_masks` (Pillow's DDS plugin decodes
those in Python per pixel and rejects the sRGB and BGRA DX10 variants).

    0 "DDS "  4 u32 header size (124)  8 u32 flags  12 u32 height  16 u32 width  28 u32 mip count
    76 pixel format: 80 u32 flags  84 fourCC  88 u32 bit count  92/96/100/104 u32 R/G/B/A masks
    128 pixel data, or (fourCC "DX10") 128 u32 dxgiFormat, 132 dimension, 136 misc, 140 array size,
        144 misc2, pixel data from 148

One-channel BC4 decodes to grey (R = G = B), two-channel BC5/ATI2 to (R, G, 0); premultiplied DXT2
and DXT4 are decoded as DXT3 and DXT5 without un-premultiplying; sRGB formats are returned as
stored (no gamma conversion); BC6H comes back as Pillow's 8-bit RGB. Rows of uncompressed data
are tightly packed, as the DDS specification computes the pitch; the header's pitch is ignored.

Mip levels (`decode_dds_chain`, rules in `mips`): the header's mip count (0 counts as 1; a count
over the levels the sides allow, down to 1x1, counts as that many) levels of the first face follow
one another, level k at max(1, w >> k) x max(1, h >> k). More than one level: the stored chain is
uploaded (the viewer uploads a DDS's levels whatever its sides); one level: no mipmapping. The
header's pitch, depth and DX10 array size are not read (only the first face or slice is decoded).
"""

from __future__ import annotations

import numpy as np

from renderer.formats.textures import mips
from renderer.formats.textures import pillow_bridge as bc
from renderer.formats.textures.channel_masks import ChannelMasks, decode_masked
from renderer.formats.textures.reader import TextureBytes
from renderer.formats.textures.registry import TextureFormat, register_format

MAGIC = b"DDS "
HEADER_SIZE = 124
DATA = 128
DX10_DATA = 148

DDPF_ALPHAPIXELS = 0x1
DDPF_ALPHA = 0x2
DDPF_FOURCC = 0x4
DDPF_RGB = 0x40
DDPF_LUMINANCE = 0x20000

_BGRA = (0x00FF0000, 0x0000FF00, 0x000000FF)
_RGBA = (0x000000FF, 0x0000FF00, 0x00FF0000)

FOURCC: dict[bytes, bc.BlockFormat | ChannelMasks] = {
    b"DXT1": bc.BC1,
    b"DXT2": bc.BC2,
    b"DXT3": bc.BC2,
    b"DXT4": bc.BC3,
    b"DXT5": bc.BC3,
    b"ATI1": bc.BC4,
    b"BC4U": bc.BC4,
    b"ATI2": bc.BC5,
    b"BC5U": bc.BC5,
    b"BC5S": bc.BC5_SIGNED,
    # D3DFORMAT numbers written in the fourCC field
    (20).to_bytes(4, "little"): ChannelMasks(24, *_BGRA, 0),  # R8G8B8
    (21).to_bytes(4, "little"): ChannelMasks(32, *_BGRA, 0xFF000000),  # A8R8G8B8
    (22).to_bytes(4, "little"): ChannelMasks(32, *_BGRA, 0),  # X8R8G8B8
    (32).to_bytes(4, "little"): ChannelMasks(32, *_RGBA, 0xFF000000),  # A8B8G8R8
    (33).to_bytes(4, "little"): ChannelMasks(32, *_RGBA, 0),  # X8B8G8R8
}

DXGI: dict[int, bc.BlockFormat | ChannelMasks] = {
    27: ChannelMasks(32, *_RGBA, 0xFF000000),  # R8G8B8A8_TYPELESS
    28: ChannelMasks(32, *_RGBA, 0xFF000000),  # R8G8B8A8_UNORM
    29: ChannelMasks(32, *_RGBA, 0xFF000000),  # R8G8B8A8_UNORM_SRGB
    70: bc.BC1, 71: bc.BC1, 72: bc.BC1,  # BC1 typeless / unorm / srgb
    73: bc.BC2, 74: bc.BC2, 75: bc.BC2,
    76: bc.BC3, 77: bc.BC3, 78: bc.BC3,
    79: bc.BC4, 80: bc.BC4,  # BC4 typeless / unorm (snorm 81: not supported)
    82: bc.BC5, 83: bc.BC5, 84: bc.BC5_SIGNED,
    87: ChannelMasks(32, *_BGRA, 0xFF000000),  # B8G8R8A8_UNORM
    88: ChannelMasks(32, *_BGRA, 0),  # B8G8R8X8_UNORM
    90: ChannelMasks(32, *_BGRA, 0xFF000000),  # B8G8R8A8_TYPELESS
    91: ChannelMasks(32, *_BGRA, 0xFF000000),  # B8G8R8A8_UNORM_SRGB
    92: ChannelMasks(32, *_BGRA, 0),  # B8G8R8X8_TYPELESS
    93: ChannelMasks(32, *_BGRA, 0),  # B8G8R8X8_UNORM_SRGB
    94: bc.BC6H, 95: bc.BC6H, 96: bc.BC6H_SIGNED,
    97: bc.BC7, 98: bc.BC7, 99: bc.BC7,
}  # fmt: skip


def _accept(head: bytes, name: str) -> bool:
    return head.startswith(MAGIC)


def _pixel_layout(tb: TextureBytes) -> tuple[bc.BlockFormat | ChannelMasks, int]:
    """The pixel layout and the offset where the top level's data starts."""
    flags, fourcc, bits, red, green, blue, alpha = tb.unpack("<I4s5I", 80, "pixel format")
    if flags & DDPF_FOURCC:
        if fourcc == b"DX10":
            dxgi = tb.u32(128, "DX10 dxgiFormat")
            layout = DXGI.get(dxgi)
            if layout is None:
                raise tb.error("DX10 dxgiFormat", 128, f"DXGI format {dxgi} is not supported")
            return layout, DX10_DATA
        layout = FOURCC.get(fourcc)
        if layout is None:
            raise tb.error("pixel format fourCC", 84, f"fourCC {fourcc!r} is not supported")
        return layout, DATA
    if flags & DDPF_RGB:
        return ChannelMasks(bits, red, green, blue, alpha if flags & DDPF_ALPHAPIXELS else 0), DATA
    if flags & DDPF_LUMINANCE:
        return ChannelMasks(bits, red, 0, 0, alpha if flags & DDPF_ALPHAPIXELS else 0, luminance=True), DATA
    if flags & DDPF_ALPHA:
        return ChannelMasks(bits, 0, 0, 0, alpha), DATA
    raise tb.error("pixel format flags", 80, f"flags {flags:#x} name no supported layout")


def _header(tb: TextureBytes) -> tuple[int, int, bc.BlockFormat | ChannelMasks, int]:
    """(width, height, pixel layout, offset of the top level's data), checked."""
    tb.need(0, DATA, "header")
    size = tb.u32(4, "header size")
    if size != HEADER_SIZE:
        raise tb.error("header size", 4, f"header size is {size}, not {HEADER_SIZE}")
    height, width = tb.unpack("<2I", 12, "height/width")
    tb.check_dimensions(width, height, "height/width", 12)
    layout, offset = _pixel_layout(tb)
    return width, height, layout, offset


def _decode_level(tb: TextureBytes, layout, offset: int, width: int, height: int, field: str) -> np.ndarray:
    if isinstance(layout, bc.BlockFormat):
        return bc.decode_blocks(tb, offset, width, height, layout, field)
    return decode_masked(tb, offset, width, height, layout, field)


def decode_dds(data: bytes, name: str) -> np.ndarray:
    tb = TextureBytes(data, name, "DDS")
    width, height, layout, offset = _header(tb)
    return _decode_level(tb, layout, offset, width, height, "top mip level")


def decode_dds_chain(data: bytes, name: str) -> mips.MipChain:
    tb = TextureBytes(data, name, "DDS")
    width, height, layout, offset = _header(tb)
    top = _decode_level(tb, layout, offset, width, height, "top mip level")
    # The header's count is advisory (a level that is missing ends the chain): clamp it to the levels
    # the sides allow before it sizes anything (a corrupt 0xFFFFFFFF once looped four billion times).
    count = min(max(tb.u32(28, "mip count"), 1), mips.full_chain_length(width, height))
    if count <= 1:
        return mips.MipChain((top,), mips.NONE)
    starts = [offset]
    for k in range(1, count):
        starts.append(starts[-1] + layout.data_size(*mips.level_size(width, height, k - 1)))

    def level(k: int) -> np.ndarray:
        w, h = mips.level_size(width, height, k)
        return _decode_level(tb, layout, starts[k], w, h, f"mip level {k}")

    return mips.stored_chain(top, count, level)


register_format(TextureFormat("DDS", _accept, decode_dds, decode_chain=decode_dds_chain))
