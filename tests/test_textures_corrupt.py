"""Corrupt textures: truncation, huge or zero dimensions, bad magic and bad fields all raise one
`FormatError` naming the file, the field and the byte offset; a bounded fuzz of mutated headers
lets nothing else escape."""

from __future__ import annotations

import struct
from io import BytesIO

import numpy as np
import pytest
from conftest import corpus_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from test_textures_decode import PILLOW_IMAGES, blp1_paletted, blp2, dds_header

from renderer.errors import FormatError
from renderer.formats.textures import MAX_DIMENSION, decode_texture

NAME = "Textures\\Broken.blp"


def expect_error(data: bytes, name: str = NAME, *words: str) -> FormatError:
    with pytest.raises(FormatError) as info:
        decode_texture(data, name)
    error = info.value
    message = str(error)
    assert name in message and error.path == name
    assert error.offset is not None and f"at byte {error.offset}" in message
    for word in words:
        assert word in message, message
    return error


def small_blp1(alpha_bits: int = 8) -> bytes:
    return blp1_paletted(4, 4, bytes(range(256)) * 4, bytes(16), bytes(16), alpha_bits)


def small_tga() -> bytes:
    out = BytesIO()
    Image.new("RGBA", (4, 4), (1, 2, 3, 4)).save(out, "TGA")
    return out.getvalue()


def small_png() -> bytes:
    out = BytesIO()
    Image.new("RGBA", (4, 4), (1, 2, 3, 4)).save(out, "PNG")
    return out.getvalue()


def test_empty_and_unknown_bytes():
    expect_error(b"", "x.blp", "empty")
    expect_error(b"GIF89a" + bytes(40), "x.blp", "unrecognised texture format")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (small_blp1()[:18], ("BLP1 header", "at byte 4", "needs 16 bytes", "has 14 left")),
        (small_blp1()[:30], ("BLP1 mip 0 offset", "at byte 28")),
        (small_blp1()[:94], ("BLP1 mip 0 size", "at byte 92")),
        (small_blp1()[:1000], ("BLP1 palette", "at byte 156")),
        (small_blp1()[:-1], ("BLP1 mip 0 paletted data", "at byte 1180", "needs 32 bytes")),
        (blp2(8, 8, 2, 0, 0, bytes(24)), ("BLP2 mip 0 DXT data", "needs 32 bytes")),
        (dds_header(8, 8)[:100], ("DDS header", "at byte 0")),
        (dds_header(8, 8) + bytes(31), ("DDS top mip level", "at byte 128", "needs 32 bytes")),
        (dds_header(8, 8, fourcc=b"DX10"), ("DDS DX10 dxgiFormat", "at byte 128")),
        (small_tga()[:40], ("TGA pixel data", "at byte 18")),
        (small_png()[:40], ("PNG image data",)),
    ],
    ids=lambda value: None if isinstance(value, tuple) else f"{value[:4]!r}-{len(value)}",
)
def test_truncated_files(data, words):
    expect_error(data, NAME, *words)


def test_huge_dimensions_are_refused_before_allocating():
    blp = bytearray(small_blp1())
    struct.pack_into("<2I", blp, 12, 0xFFFFFFFF, 2)
    expect_error(bytes(blp), NAME, "BLP1 width/height", "at byte 12", f"over {MAX_DIMENSION}")
    struct.pack_into("<2I", blp, 12, 0, 2)
    expect_error(bytes(blp), NAME, "at least 1")
    # Within the limits but far bigger than the bytes present: the size check fires, no allocation.
    expect_error(dds_header(16384, 4096) + bytes(64), NAME, "DDS top mip level", "needs 33554432 bytes")
    expect_error(blp2(16384, 4096, 3, 8, 8, bytes(64)), NAME, "BLP2 mip 0 BGRA data", "needs 268435456")
    expect_error(dds_header(16384, 16384) + bytes(64), NAME, "DDS height/width", "pixels is refused")
    tga = bytearray(small_tga())
    struct.pack_into("<2H", tga, 12, 65535, 65535)
    expect_error(bytes(tga), NAME, "TGA width/height", "at byte 12")
    struct.pack_into("<2H", tga, 12, 16000, 16000)
    expect_error(bytes(tga), NAME, "pixels is refused")
    png = bytearray(small_png())
    struct.pack_into(">2I", png, 16, 100000, 1)
    expect_error(bytes(png), NAME, "PNG IHDR width/height", "at byte 16")


def test_bad_fields_name_their_offsets():
    expect_error(b"BLP0" + bytes(200), NAME, "BLP0", "not supported")
    expect_error(small_blp1(alpha_bits=3), NAME, "alpha depth 3")
    content = bytearray(small_blp1())
    struct.pack_into("<I", content, 4, 7)
    expect_error(bytes(content), NAME, "BLP1 content", "at byte 4")
    expect_error(blp2(4, 4, 9, 0, 0, bytes(16)), NAME, "BLP2 encoding", "at byte 8")
    expect_error(blp2(4, 4, 2, 8, 5, bytes(16)), NAME, "BLP2 alpha encoding", "at byte 10")
    bad_size = bytearray(dds_header(4, 4) + bytes(8))
    struct.pack_into("<I", bad_size, 4, 100)
    expect_error(bytes(bad_size), NAME, "DDS header size", "at byte 4")
    expect_error(dds_header(4, 4, fourcc=b"ABCD") + bytes(16), NAME, "fourCC", "at byte 84")
    expect_error(dds_header(4, 4, fourcc=b"DX10", dxgi=2) + bytes(256), NAME, "DXGI format 2")
    masks = dds_header(4, 4, 0x40, b"\0\0\0\0", 16, (0xF0F0, 0, 0, 0)) + bytes(32)
    expect_error(masks, NAME, "not one contiguous run")


@pytest.mark.corpus
def test_blp1_jpeg_header_size_past_the_end():
    data = bytearray(corpus_path("tdauth__wc3lib/src/blp/test/TEAMCOLOR/TeamColor00.blp").read_bytes())
    struct.pack_into("<I", data, 156, 0x7FFFFFFF)
    expect_error(bytes(data), NAME, "BLP1 shared JPEG header", "at byte 160")
    data = bytearray(corpus_path("tdauth__wc3lib/src/blp/test/TEAMCOLOR/TeamColor00.blp").read_bytes())
    struct.pack_into("<I", data, 12, 16)  # header says 16 wide, JPEG frame is 8
    expect_error(bytes(data), NAME, "JPEG frame is 8x8, header says 16x8")
    data = bytearray(corpus_path("tdauth__wc3lib/src/blp/test/TEAMCOLOR/TeamColor00.blp").read_bytes())
    data[1180 + 20 :] = bytes(len(data) - 1200)  # wipe the entropy-coded data
    expect_error(bytes(data), NAME, "BLP1 mip 0 JPEG data", "JPEG decoder failed")


# --- fuzz ---------------------------------------------------------------------------------------


def fuzz_seeds() -> list[bytes]:
    seeds = [
        small_blp1(8),
        blp1_paletted(5, 3, bytes(1024), bytes(15), bytes(2), 1),
        blp2(4, 4, 2, 8, 7, bytes(16)),
        blp2(2, 2, 3, 8, 0, bytes(16)),
        dds_header(4, 4) + bytes(8),
        dds_header(2, 2, 0x41, b"\0\0\0\0", 32, (0xFF0000, 0xFF00, 0xFF, 0xFF000000)) + bytes(16),
        dds_header(4, 4, fourcc=b"DX10", dxgi=98) + bytes(16),
        small_tga(),
        small_png(),
    ]
    for rel in ("tdauth__wc3lib/src/blp/test/TEAMCOLOR/TeamColor00.blp", PILLOW_IMAGES + "blp/blp2_dxt1a.blp"):
        from conftest import CORPUS

        if (CORPUS / rel).is_file():
            seeds.append((CORPUS / rel).read_bytes())
    return seeds


SEEDS = fuzz_seeds()
INTERESTING_U32 = [0, 1, 3, 4, 7, 8, 255, 256, 1024, 16384, 16385, 0x7FFFFFFF, 0xFFFFFFFF]


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            at = draw(st.integers(0, min(len(data), 200) - 1))
            data[at] = draw(st.integers(0, 255))
        else:
            at = draw(st.integers(0, min(len(data), 200) // 4 - 1)) * 4
            value = draw(st.sampled_from(INTERESTING_U32))
            data[at : at + 4] = value.to_bytes(4, "little")
    if draw(st.booleans()):
        del data[draw(st.integers(0, len(data))) :]
    return bytes(data)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.sampled_from(["fuzz.blp", "fuzz.dds", "fuzz.tga", "fuzz"]))
def test_fuzzed_headers_raise_only_format_error(data, name):
    try:
        image = decode_texture(data, name)
    except FormatError as error:
        assert error.path == name and name in str(error)
        return
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 4
    assert image.shape[0] <= MAX_DIMENSION and image.shape[1] <= MAX_DIMENSION
