"""Halo bitmap tags: every pixel format on hand-made data, DXT against Pillow's decoder, bad input."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from conftest import corpus_files
from test_halo_tagbuild import bitmap_tag

from renderer.errors import FormatError
from renderer.formats.halo import decode_bitmap_tag, read_bitmap_tag
from renderer.formats.halo.bitmap import FORMATS, morton_index

CODE = {name: code for code, name in FORMATS.items()}


def decode(w, h, fmt, pixels, **kw):
    return decode_bitmap_tag(bitmap_tag(w, h, CODE[fmt], bytes(pixels), **kw), f"t.{fmt}.bitmap")


def test_a8r8g8b8_and_x8r8g8b8_are_little_endian_bgra():
    px = bytes([1, 2, 3, 4, 10, 20, 30, 40])  # B G R A
    assert decode(2, 1, "a8r8g8b8", px).tolist() == [[[3, 2, 1, 4], [30, 20, 10, 40]]]
    assert decode(2, 1, "x8r8g8b8", px).tolist() == [[[3, 2, 1, 255], [30, 20, 10, 255]]]


def test_16_bit_formats():
    words = lambda *ws: struct.pack(f"<{len(ws)}H", *ws)  # noqa: E731
    assert decode(3, 1, "r5g6b5", words(0xF800, 0x07E0, 0x001F)).tolist() == [
        [[255, 0, 0, 255], [0, 255, 0, 255], [0, 0, 255, 255]]]
    assert decode(2, 1, "a1r5g5b5", words(0xFC00, 0x03E0)).tolist() == [[[255, 0, 0, 255], [0, 255, 0, 0]]]
    assert decode(2, 1, "a4r4g4b4", words(0xF00F, 0x1230)).tolist() == [[[0, 0, 255, 255], [34, 51, 0, 17]]]
    assert decode(1, 1, "a8y8", words(0x80C0)).tolist() == [[[192, 192, 192, 128]]]
    # 5-bit mid value expands with rounding: 16 * 255 / 31 = 131.6 -> 132
    assert decode(1, 1, "r5g6b5", words(16 << 11))[0, 0, 0] == 132


def test_8_bit_formats():
    assert decode(2, 1, "a8", [7, 200]).tolist() == [[[255, 255, 255, 7], [255, 255, 255, 200]]]
    assert decode(2, 1, "y8", [7, 200]).tolist() == [[[7, 7, 7, 255], [200, 200, 200, 255]]]
    assert decode(2, 1, "ay8", [7, 200]).tolist() == [[[7, 7, 7, 7], [200, 200, 200, 200]]]


def test_rows_stay_top_first():
    img = decode(1, 2, "y8", [0, 255])
    assert img[0, 0, 0] == 0 and img[1, 0, 0] == 255


def _dxt1_block(c0, c1, indices):
    bits = sum(i << (2 * k) for k, i in enumerate(indices))
    return struct.pack("<HHI", c0, c1, bits)


def test_dxt1_four_and_three_colour_blocks():
    idx = [0, 1, 2, 3] * 4
    four = decode(4, 4, "dxt1", _dxt1_block(0xF800, 0x001F, idx))
    assert four[0].tolist() == [[255, 0, 0, 255], [0, 0, 255, 255], [170, 0, 85, 255], [85, 0, 170, 255]]
    three = decode(4, 4, "dxt1", _dxt1_block(0x001F, 0xF800, idx))
    assert three[0].tolist() == [[0, 0, 255, 255], [255, 0, 0, 255], [127, 0, 127, 255], [0, 0, 0, 0]]


def test_dxt3_and_dxt5_alpha():
    colour = _dxt1_block(0xFFFF, 0x0000, [0] * 16)
    nibbles = bytes((2 * k) | ((2 * k + 1) << 4) for k in range(8))
    img = decode(4, 4, "dxt3", nibbles + colour)
    assert img[..., 3].ravel().tolist() == [17 * i for i in range(16)]
    assert (img[..., :3] == 255).all()
    bits = sum((k % 8) << (3 * k) for k in range(16))
    alpha = bytes([255, 0]) + bits.to_bytes(6, "little")
    img5 = decode(4, 4, "dxt5", alpha + colour)
    assert img5[0, :, 3].tolist() == [255, 0, 218, 182] and img5[1, :, 3].tolist() == [145, 109, 72, 36]
    six = bytes([0, 255]) + bits.to_bytes(6, "little")
    img6 = decode(4, 4, "dxt5", six + colour)
    assert img6[1, :, 3].tolist() == [153, 204, 0, 255]


def test_dxt_sizes_that_are_not_multiples_of_four():
    blocks = _dxt1_block(0xF800, 0x001F, [0] * 16) + _dxt1_block(0x07E0, 0, [0] * 16)
    img = decode(6, 3, "dxt1", blocks)
    assert img.shape == (3, 6, 4)
    assert img[0, 0].tolist() == [255, 0, 0, 255] and img[0, 5].tolist() == [0, 255, 0, 255]


def test_swizzled_textures_are_deswizzled():
    for w, h in ((4, 4), (8, 2), (2, 8)):
        order = morton_index(w, h)
        assert sorted(order.ravel().tolist()) == list(range(w * h))
        want = np.arange(w * h, dtype=np.uint8).reshape(h, w)
        stored = np.zeros(w * h, np.uint8)
        stored[order.ravel()] = want.ravel()
        img = decode(w, h, "y8", stored.tobytes(), flags=8)
        assert np.array_equal(img[..., 0], want)
    assert morton_index(4, 4)[1].tolist() == [2, 3, 6, 7]


def test_white_and_unsupported_formats():
    assert (decode(2, 2, "a8", [0] * 4, data_type=3) == 255).all()
    with pytest.raises(FormatError, match="p8 bump is not supported"):
        decode(2, 2, "p8 bump", [0] * 4)


def test_bad_bitmaps():
    with pytest.raises(FormatError, match="runs past"):
        decode(4, 4, "a8r8g8b8", bytes(60))
    data = bytearray(bitmap_tag(2, 2, 11, bytes(16)))
    struct.pack_into(">H", data, len(data) - 48 + 12, 4)
    with pytest.raises(FormatError, match="unknown pixel format 4"):
        decode_bitmap_tag(bytes(data), "x.bitmap")
    data = bytearray(bitmap_tag(2, 2, 11, bytes(16)))
    struct.pack_into(">H", data, len(data) - 48 + 4, 0)
    with pytest.raises(FormatError, match="size 0x2"):
        decode_bitmap_tag(bytes(data), "x.bitmap")
    data = bytearray(bitmap_tag(2, 2, 11, bytes(16)))
    struct.pack_into(">I", data, 64 + 96, 0x7FFFFFFF)
    with pytest.raises(FormatError) as e:
        decode_bitmap_tag(bytes(data), "x.bitmap")
    assert e.value.where == "bitmap data" and "BitmapData" in e.value.problem
    with pytest.raises(FormatError, match="tag class"):
        decode_bitmap_tag(data[:36] + b"mod2" + data[40:], "x.bitmap")
    for cut in range(0, len(data), 7):
        with pytest.raises(FormatError):
            decode_bitmap_tag(bitmap_tag(2, 2, 11, bytes(16))[:cut], "cut.bitmap")


def _dds(w: int, h: int, fourcc: bytes, payload: bytes) -> bytes:
    pf = struct.pack("<II4s5I", 32, 4, fourcc, 0, 0, 0, 0, 0)
    head = struct.pack("<7I44s", 124, 0x81007, h, w, len(payload), 0, 0, b"\0" * 44) + pf
    head += struct.pack("<5I", 0x1000, 0, 0, 0, 0)
    return b"DDS " + head + payload


CORPUS_BITMAPS = corpus_files("*.bitmap")


@pytest.mark.corpus
@pytest.mark.parametrize("p", CORPUS_BITMAPS, ids=[p.name for p in CORPUS_BITMAPS])
def test_dxt_matches_pillow_on_the_corpus(p):
    """An independent decoder (Pillow's BCn) agrees with ours on the corpus bitmaps' top level."""
    from PIL import Image

    from renderer.formats.halo.bitmap import level0_size

    data = p.read_bytes()
    tag = read_bitmap_tag(data, str(p))
    e = tag.entries[0]
    payload = data[tag.pixels_at + e.offset : tag.pixels_at + e.offset + level0_size(e)]
    dds = _dds(e.width, e.height, e.format.upper().encode(), payload)
    ref = np.asarray(Image.open(io.BytesIO(dds)).convert("RGBA"))
    ours = decode_bitmap_tag(data, str(p))
    assert ours.shape == ref.shape
    diff = np.abs(ours.astype(int) - ref.astype(int))
    assert diff.max() <= 2 and diff.mean() < 0.5
