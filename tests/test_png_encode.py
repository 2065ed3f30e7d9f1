"""renderer.png.encode_png: our PNG encoder (Sub filter, ISA-L deflate) writes standard PNGs that an
independent decoder (Pillow's, with zlib) reads back to the same pixels, with the trace chunk."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from renderer.png import DEFLATE, TRACE_KEY, encode_png, png_bytes, read_png


@pytest.mark.parametrize(("h", "w", "c"), [(1, 1, 4), (3, 7, 4), (64, 33, 3), (257, 129, 4)])
def test_any_image_reads_back_as_its_pixels(h, w, c):
    rng = np.random.default_rng(h * 1000 + w)
    pixels = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
    pixels[: h // 2] = 0  # runs of background, as a frame has
    data = encode_png(pixels, {"k": "v"})
    with Image.open(io.BytesIO(data)) as im:
        assert im.mode == ("RGBA" if c == 4 else "RGB") and im.size == (w, h)
        assert np.array_equal(np.asarray(im), pixels)
        assert im.text == {"k": "v"}
    assert encode_png(pixels, {"k": "v"}) == data  # the same pixels and text, the same bytes


def test_chunks_are_standard_and_checksummed():
    pixels = np.zeros((5, 6, 4), np.uint8)
    pixels[2, 3] = (255, 10, 20, 128)
    data = png_bytes(pixels, {"renderer_version": "0.2"})
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, kinds = 8, []
    while at < len(data):
        (n,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + n]
        assert struct.unpack(">I", data[at + 8 + n:at + 12 + n])[0] == zlib.crc32(kind + body)
        kinds.append(kind)
        if kind == b"IDAT":
            raw = np.frombuffer(zlib.decompress(body), np.uint8).reshape(5, 1 + 6 * 4)
            assert set(raw[:, 0]) == {1}  # every row filtered with Sub
        at += 12 + n
    assert kinds == [b"IHDR", b"tEXt", b"IDAT", b"IEND"]
    rgba, trace = read_png(data)
    assert np.array_equal(rgba, pixels) and trace == {"renderer_version": "0.2"}
    assert TRACE_KEY.encode() + b"\0" in data


def test_the_fast_deflate_is_the_one_in_use():
    assert DEFLATE[0] == "isal"  # a dependency (pyproject); zlib is only the fallback's


def test_what_it_cannot_encode_is_refused_in_one_sentence():
    for bad in (np.zeros((4, 4), np.uint8), np.zeros((0, 4, 4), np.uint8), np.zeros((2, 2, 2), np.uint8)):
        with pytest.raises(ValueError, match="RGBA or RGB image"):
            encode_png(bad)
