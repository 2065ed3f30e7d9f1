"""Halo bitmap tags (`bitm`, version 7): parse the tag and decode one bitmap's top mip level to RGBA.

Layout (HEK tag file, big-endian; INV bitmap.json): 64-byte header, the 108-byte Bitmap body, then
its children in field order: the compressed colour plate bytes, the processed pixel data bytes, the
sequences[] (64 bytes each, each followed by its sprites[] of 32), the bitmap data[] (48 bytes each).

| Bitmap body off | field |
|---|---|
| 0 | u16 type (2d textures, 3d textures, cube maps, sprites, interface bitmaps) |
| 28 | TagDataOffset compressed colour plate (u32 size, u32 external, u32 file offset, u64 pointer) |
| 48 | TagDataOffset processed pixel data |
| 84 | block sequences (BitmapGroupSequence, 64; sprites block at 52) |
| 96 | block bitmap data (BitmapData, 48) |

| BitmapData off | field |
|---|---|
| 0 | FourCC 'bitm'; 4 u16 width; 6 u16 height; 8 u16 depth |
| 10 | u16 type: 0 2D, 1 3D, 2 cube map, 3 white |
| 12 | u16 format (see FORMATS) |
| 14 | u16 flags: bit0 power of two, bit1 compressed, bit2 palettized, bit3 swizzled |
| 20 | u16 mipmap count (levels after the first) |
| 24 | u32 pixel data offset, into the processed pixel data |

The pixel bytes themselves are in D3D's little-endian layout (16- and 32-bit texels are little-endian
words: A8R8G8B8 is the bytes B, G, R, A), exactly as a DDS file stores them. Level 0 (for a cube
map: face 0 of level 0; for a 3D texture: slice 0) starts at the pixel data offset.

Decoding returns (H, W, 4) uint8 RGBA with row 0 = the first stored row (the top of the image,
as D3D's texture coordinates expect: v = 0 samples row 0). Monochrome formats expand as the HEK does:
A8 -> white with alpha; Y8 -> grey, opaque; AY8 -> the value in all four channels; A8Y8 -> grey + alpha.
DXT colour endpoints expand 5/6 bits by bit replication; DXT1 blocks with c0 <= c1 are 3-colour
with index 3 transparent black; DXT3/DXT5 colour blocks always use 4 colours; interpolated colours
are (2a + b) / 3 and (a + b) / 2, rounded down. P8 bump (a fixed palette) and BC7 are not decoded.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from renderer.errors import FormatError
from renderer.formats.textures.reader import MAX_PIXELS

from .tagfile import HEADER_SIZE, TagCursor, read_header

CLASSES = {b"bitm": 7}
BODY_SIZE = 108
TAG_DATA = struct.Struct(">IIIQ")
BITMAP_DATA = np.dtype({
    "names": ["cls", "width", "height", "depth", "type", "format", "flags", "mipmaps", "offset"],
    "formats": ["S4", ">u2", ">u2", ">u2", ">u2", ">u2", ">u2", ">u2", ">u4"],
    "offsets": [0, 4, 6, 8, 10, 12, 14, 20, 24], "itemsize": 48})
SEQUENCE = np.dtype({"names": ["sprites"], "formats": [">u4"], "offsets": [52], "itemsize": 64})
SPRITE_SIZE = 32

FORMATS = {
    0: "a8", 1: "y8", 2: "ay8", 3: "a8y8", 6: "r5g6b5", 8: "a1r5g5b5", 9: "a4r4g4b4",
    10: "x8r8g8b8", 11: "a8r8g8b8", 14: "dxt1", 15: "dxt3", 16: "dxt5", 17: "p8 bump", 18: "bc7",
}
BYTES_PER_PIXEL = {"a8": 1, "y8": 1, "ay8": 1, "p8 bump": 1, "a8y8": 2, "r5g6b5": 2, "a1r5g5b5": 2,
                   "a4r4g4b4": 2, "x8r8g8b8": 4, "a8r8g8b8": 4}
BLOCK_BYTES = {"dxt1": 8, "dxt3": 16, "dxt5": 16, "bc7": 16}
DATA_TYPES = ("2d", "3d", "cube", "white")
TAG_TYPES = ("2d textures", "3d textures", "cube maps", "sprites", "interface bitmaps")
MAX_DIMENSION = 16384  # one side; the pixels of one bitmap are bounded by textures.reader.MAX_PIXELS
FLAG_SWIZZLED = 8


@dataclass
class BitmapEntry:
    index: int
    width: int
    height: int
    depth: int
    type: str
    format: str
    flags: int
    mipmaps: int
    offset: int  # into the processed pixel data
    entry_offset: int  # of the BitmapData record in the file


@dataclass
class BitmapTag:
    path: str
    type: str
    entries: list[BitmapEntry]
    pixels_at: int  # file offset of the processed pixel data
    pixels_size: int


def _where(i: int) -> str:
    return f"bitmap data[{i}]"


def read_bitmap_tag(data: bytes | memoryview, path: str) -> BitmapTag:
    """Parse the structure of a bitmap tag (not its pixels). Raises FormatError on bad input."""
    read_header(data, path, CLASSES)  # checksum mismatches are not interesting for a texture
    cur = TagCursor(data, path, HEADER_SIZE)
    at = cur.take(BODY_SIZE, "bitmap body", "the bitmap body")
    body = bytes(data[at : at + BODY_SIZE])
    tag_type = struct.unpack_from(">H", body, 0)[0]
    plate_size = TAG_DATA.unpack_from(body, 28)[0]
    pixels_size = TAG_DATA.unpack_from(body, 48)[0]
    n_sequences = struct.unpack_from(">I", body, 84)[0]
    n_data = struct.unpack_from(">I", body, 96)[0]
    cur.take(plate_size, "compressed color plate data", "the compressed colour plate")
    pixels_at = cur.take(pixels_size, "processed pixel data", "the processed pixel data")
    seqs, _ = cur.array(n_sequences, SEQUENCE, "sequences", "BitmapGroupSequence elements")
    for i, s in enumerate(seqs):
        cur.take(int(s["sprites"]) * SPRITE_SIZE, f"sequences[{i}].sprites", "BitmapGroupSprite elements")
    records, roff = cur.array(n_data, BITMAP_DATA, "bitmap data", "BitmapData elements")
    entries = []
    for i, r in enumerate(records):
        eoff = roff + i * BITMAP_DATA.itemsize
        fmt = FORMATS.get(int(r["format"]))
        if fmt is None:
            raise FormatError(path, _where(i), eoff + 12, f"unknown pixel format {int(r['format'])}")
        dtype = int(r["type"])
        if dtype >= len(DATA_TYPES):
            raise FormatError(path, _where(i), eoff + 10, f"unknown bitmap data type {dtype}")
        w, h, d = int(r["width"]), int(r["height"]), int(r["depth"])
        if not (0 < w <= MAX_DIMENSION and 0 < h <= MAX_DIMENSION):
            raise FormatError(path, _where(i), eoff + 4, f"size {w}x{h} is outside 1..{MAX_DIMENSION}")
        if w * h > MAX_PIXELS:  # a "white" bitmap has no pixel data to check its size against
            raise FormatError(path, _where(i), eoff + 4, f"size {w}x{h} is more than {MAX_PIXELS} pixels")
        entries.append(BitmapEntry(i, w, h, max(d, 1), DATA_TYPES[dtype], fmt, int(r["flags"]), int(r["mipmaps"]),
                                   int(r["offset"]), eoff))
    kind = TAG_TYPES[tag_type] if tag_type < len(TAG_TYPES) else f"unknown({tag_type})"
    return BitmapTag(path, kind, entries, pixels_at, pixels_size)


def level0_size(e: BitmapEntry) -> int:
    """Bytes of the top level of one face/slice."""
    if e.format in BLOCK_BYTES:
        return ((e.width + 3) // 4) * ((e.height + 3) // 4) * BLOCK_BYTES[e.format]
    return e.width * e.height * BYTES_PER_PIXEL[e.format]


def decode_bitmap_tag(data: bytes | memoryview, path: str, index: int = 0) -> np.ndarray:
    """The top mip level of bitmap `index` (face 0 of a cube map, slice 0 of a 3D texture) as (H, W, 4) RGBA."""
    tag = read_bitmap_tag(data, path)
    if not tag.entries:
        raise FormatError(path, "bitmap data", None, "the bitmap tag holds no bitmaps")
    if not 0 <= index < len(tag.entries):
        raise FormatError(path, "bitmap data", None, f"bitmap index {index} is outside 0..{len(tag.entries) - 1}")
    return decode_entry(data, tag, tag.entries[index])


def decode_entry(data: bytes | memoryview, tag: BitmapTag, e: BitmapEntry) -> np.ndarray:
    if e.type == "white":
        return np.full((e.height, e.width, 4), 255, np.uint8)
    if e.format in ("p8 bump", "bc7"):
        raise FormatError(tag.path, _where(e.index), e.entry_offset + 12, f"pixel format {e.format} is not supported")
    size = level0_size(e)
    if e.offset + size > tag.pixels_size:
        raise FormatError(tag.path, _where(e.index), e.entry_offset + 24,
                          f"level 0 ({e.width}x{e.height} {e.format}, {size} bytes at pixel data offset {e.offset}) "
                          f"runs past the {tag.pixels_size} bytes of processed pixel data")
    start = tag.pixels_at + e.offset
    raw = np.frombuffer(data, np.uint8, size, start)
    if e.format in BLOCK_BYTES:
        return decode_dxt(raw, e.width, e.height, e.format)
    rgba = decode_uncompressed(raw, e.width, e.height, e.format)
    if e.flags & FLAG_SWIZZLED:
        rgba = deswizzle(rgba)
    return rgba


# -- uncompressed ------------------------------------------------------------------------------------

def _expand(v: np.ndarray, bits: int) -> np.ndarray:
    """An n-bit channel to 8 bits, rounded: v * 255 / (2^n - 1)."""
    top = (1 << bits) - 1
    return ((v.astype(np.uint32) * 255 + top // 2) // top).astype(np.uint8)


def decode_uncompressed(raw: np.ndarray, w: int, h: int, fmt: str) -> np.ndarray:
    out = np.empty((h * w, 4), np.uint8)
    if BYTES_PER_PIXEL[fmt] == 1:
        v = raw[: w * h]
        if fmt == "a8":
            out[:, :3] = 255
            out[:, 3] = v
        elif fmt == "y8":
            out[:, :3] = v[:, None]
            out[:, 3] = 255
        else:  # ay8
            out[:] = v[:, None]
    elif BYTES_PER_PIXEL[fmt] == 2:
        p = raw[: w * h * 2].view("<u2").astype(np.uint32)
        if fmt == "a8y8":
            out[:, :3] = (p & 0xFF).astype(np.uint8)[:, None]
            out[:, 3] = (p >> 8).astype(np.uint8)
        elif fmt == "r5g6b5":
            out[:, 0] = _expand(p >> 11, 5)
            out[:, 1] = _expand((p >> 5) & 0x3F, 6)
            out[:, 2] = _expand(p & 0x1F, 5)
            out[:, 3] = 255
        elif fmt == "a1r5g5b5":
            out[:, 0] = _expand((p >> 10) & 0x1F, 5)
            out[:, 1] = _expand((p >> 5) & 0x1F, 5)
            out[:, 2] = _expand(p & 0x1F, 5)
            out[:, 3] = np.where(p & 0x8000, 255, 0).astype(np.uint8)
        else:  # a4r4g4b4
            out[:, 0] = _expand((p >> 8) & 0xF, 4)
            out[:, 1] = _expand((p >> 4) & 0xF, 4)
            out[:, 2] = _expand(p & 0xF, 4)
            out[:, 3] = _expand(p >> 12, 4)
    else:
        bgra = raw[: w * h * 4].reshape(-1, 4)
        out[:, 0] = bgra[:, 2]
        out[:, 1] = bgra[:, 1]
        out[:, 2] = bgra[:, 0]
        out[:, 3] = 255 if fmt == "x8r8g8b8" else bgra[:, 3]
    return out.reshape(h, w, 4)


def morton_index(w: int, h: int) -> np.ndarray:
    """(h, w) array: where texel (y, x) sits in Xbox swizzled (Morton, x in the lowest bit) order."""
    xs = np.zeros(w, np.int64)
    ys = np.zeros(h, np.int64)
    bit = 0
    xb = yb = 0
    while (1 << xb) < w or (1 << yb) < h:
        if (1 << xb) < w:
            xs |= ((np.arange(w) >> xb) & 1) << bit
            xb += 1
            bit += 1
        if (1 << yb) < h:
            ys |= ((np.arange(h) >> yb) & 1) << bit
            yb += 1
            bit += 1
    return ys[:, None] | xs[None, :]


def deswizzle(rgba: np.ndarray) -> np.ndarray:
    """Undo the Xbox texture swizzle (power-of-two sizes; other sizes are returned as they are)."""
    h, w = rgba.shape[:2]
    if w & (w - 1) or h & (h - 1):
        return rgba
    flat = rgba.reshape(h * w, 4)
    return flat[morton_index(w, h)]


# -- DXT -----------------------------------------------------------------------------------------------

def _rgb565(c: np.ndarray) -> np.ndarray:
    """(n,) u16 -> (n, 3) int32 expanded by bit replication."""
    c = c.astype(np.int32)
    r, g, b = (c >> 11) & 0x1F, (c >> 5) & 0x3F, c & 0x1F
    return np.stack([(r << 3) | (r >> 2), (g << 2) | (g >> 4), (b << 3) | (b >> 2)], axis=1)


def _color_blocks(color: np.ndarray, dxt1: bool) -> np.ndarray:
    """(n, 8) colour block bytes -> (n, 16, 4) RGBA texels (alpha from DXT1's 3-colour mode only)."""
    n = len(color)
    c0 = color[:, 0:2].copy().view("<u2").ravel()
    c1 = color[:, 2:4].copy().view("<u2").ravel()
    bits = color[:, 4:8].copy().view("<u4").ravel()
    a, b = _rgb565(c0), _rgb565(c1)
    palette = np.empty((n, 4, 4), np.int32)
    palette[:, 0, :3] = a
    palette[:, 1, :3] = b
    palette[:, :, 3] = 255
    four = (c0 > c1) if dxt1 else np.ones(n, bool)
    f4 = four[:, None]
    palette[:, 2, :3] = np.where(f4, (2 * a + b) // 3, (a + b) // 2)
    palette[:, 3, :3] = np.where(f4, (a + 2 * b) // 3, 0)
    palette[:, 3, 3] = np.where(four, 255, 0)
    idx = (bits[:, None] >> (2 * np.arange(16, dtype=np.uint32))[None, :]) & 3
    return np.take_along_axis(palette, idx[:, :, None].astype(np.intp), axis=1)


def _dxt5_alpha(alpha: np.ndarray) -> np.ndarray:
    """(n, 8) DXT5 alpha block bytes -> (n, 16) alpha."""
    n = len(alpha)
    a0 = alpha[:, 0].astype(np.int32)
    a1 = alpha[:, 1].astype(np.int32)
    bits = np.zeros(n, np.uint64)
    for k in range(6):
        bits |= alpha[:, 2 + k].astype(np.uint64) << np.uint64(8 * k)
    idx = ((bits[:, None] >> (3 * np.arange(16, dtype=np.uint64))[None, :]) & np.uint64(7)).astype(np.intp)
    table = np.empty((n, 8), np.int32)
    table[:, 0], table[:, 1] = a0, a1
    eight = (a0 > a1)[:, None]
    i = np.arange(1, 7)[None, :]
    interp8 = ((7 - i) * a0[:, None] + i * a1[:, None]) // 7
    i5 = np.arange(1, 5)[None, :]
    interp6 = ((5 - i5) * a0[:, None] + i5 * a1[:, None]) // 5
    six = np.concatenate([interp6, np.zeros((n, 1), np.int32), np.full((n, 1), 255, np.int32)], axis=1)
    table[:, 2:] = np.where(eight, interp8, six)
    return np.take_along_axis(table, idx, axis=1)


def decode_dxt(raw: np.ndarray, w: int, h: int, fmt: str) -> np.ndarray:
    """Decode every block at once: (H, W, 4) RGBA."""
    bw, bh = (w + 3) // 4, (h + 3) // 4
    bsize = BLOCK_BYTES[fmt]
    blocks = raw[: bw * bh * bsize].reshape(bw * bh, bsize)
    if fmt == "dxt1":
        texels = _color_blocks(blocks, True)
    else:
        texels = _color_blocks(blocks[:, 8:16], False)
        if fmt == "dxt3":
            nib = blocks[:, 0:8]
            alpha = np.empty((len(blocks), 16), np.int32)
            alpha[:, 0::2] = nib & 0xF
            alpha[:, 1::2] = nib >> 4
            texels[:, :, 3] = alpha * 17
        else:
            texels[:, :, 3] = _dxt5_alpha(blocks[:, 0:8])
    img = texels.astype(np.uint8).reshape(bh, bw, 4, 4, 4).transpose(0, 2, 1, 3, 4).reshape(bh * 4, bw * 4, 4)
    return np.ascontiguousarray(img[:h, :w])
