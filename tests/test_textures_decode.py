"""Texture decoding: reference images, every corpus texture, and synthetic files for the layouts the
corpus lacks (paletted alpha depths, BLP2 BGRA and DXT3/5, DDS DX10 and mask-described pixels)."""

from __future__ import annotations

import struct
from io import BytesIO

import numpy as np
import pytest
from conftest import CORPUS, corpus_files, corpus_path
from PIL import Image

from renderer.errors import FormatError
from renderer.formats.textures import decode_texture, registered_formats

PILLOW_IMAGES = "python-pillow__Pillow/Tests/images/"


def reference_rgba(rel: str) -> np.ndarray:
    with Image.open(corpus_path(PILLOW_IMAGES + rel)) as image:
        return np.array(image.convert("RGBA"))


def decode_file(rel: str) -> np.ndarray:
    path = corpus_path(rel)
    return decode_texture(path.read_bytes(), str(path))


# --- builders for synthetic files ---------------------------------------------------------------


def blp1_paletted(width, height, palette_bgra, indices, alpha_plane, alpha_bits):
    header = struct.pack("<4s6I", b"BLP1", 1, alpha_bits, width, height, 4, 0)
    data_at = 28 + 128 + 1024
    mips = struct.pack("<16I", data_at, *[0] * 15) + struct.pack("<16I", len(indices) + len(alpha_plane), *[0] * 15)
    return header + mips + bytes(palette_bgra) + bytes(indices) + bytes(alpha_plane)


def blp2(width, height, encoding, alpha_depth, alpha_encoding, payload, palette_bgra=bytes(1024)):
    header = struct.pack("<4sI4B2I", b"BLP2", 1, encoding, alpha_depth, alpha_encoding, 0, width, height)
    data_at = 20 + 128 + 1024
    mips = struct.pack("<16I", data_at, *[0] * 15) + struct.pack("<16I", len(payload), *[0] * 15)
    return header + mips + bytes(palette_bgra) + bytes(payload)


def dds_header(width, height, pf_flags=0x4, fourcc=b"DXT1", bits=0, masks=(0, 0, 0, 0), dxgi=None):
    head = struct.pack("<4s7I", b"DDS ", 124, 0x1007, height, width, 0, 0, 1)
    head += bytes(44)
    head += struct.pack("<2I4s5I", 32, pf_flags, fourcc, bits, *masks)
    head += struct.pack("<5I", 0x1000, 0, 0, 0, 0)
    assert len(head) == 128
    if dxgi is not None:
        head += struct.pack("<5I", dxgi, 3, 0, 1, 0)
    return head


def dds_payload(rel: str) -> tuple[int, int, bytes]:
    """Width, height and the bytes after the header (legacy or DX10) of a corpus DDS file."""
    data = corpus_path(PILLOW_IMAGES + rel).read_bytes()
    height, width = struct.unpack_from("<2I", data, 12)
    start = 148 if data[84:88] == b"DX10" else 128
    return width, height, data[start:]


def reference_palette_decode(palette_bgra, indices, alphas):
    """Per-pixel, obviously-correct expectation for the paletted tests."""
    pal = np.frombuffer(bytes(palette_bgra), np.uint8).reshape(256, 4)
    return np.array([[*pal[i][2::-1], a] for i, a in zip(indices, alphas, strict=True)], dtype=np.uint8)


def pack_alpha(alphas, bits):
    """Pack alpha values of `bits` bits, first pixel in the least significant bits of each byte."""
    out = bytearray((len(alphas) * bits + 7) // 8)
    for i, a in enumerate(alphas):
        bit = i * bits
        out[bit // 8] |= a << (bit % 8)
    return bytes(out)


def dxt1_reference(blocks: bytes, width: int, height: int, replicate_bits: bool, transparent: bool):
    """A plain numpy DXT1 decoder with a choice of 5/6-bit expansion: bit replication (what GPUs and
    Pillow's C decoder do) or a bare shift (what Pillow's pure-Python BLP plugin does)."""
    b = np.frombuffer(blocks, dtype="<u2").reshape(-1, 4).astype(np.int32)
    c0, c1, bits = b[:, 0], b[:, 1], b[:, 2] | (b[:, 3] << 16)

    def expand(c):
        r, g, bl = (c >> 11) & 31, (c >> 5) & 63, c & 31
        if replicate_bits:
            return np.stack([(r << 3) | (r >> 2), (g << 2) | (g >> 4), (bl << 3) | (bl >> 2)], -1)
        return np.stack([r << 3, g << 2, bl << 3], -1)

    p0, p1 = expand(c0), expand(c1)
    four = (c0 > c1)[:, None]
    colours = np.stack([p0, p1, np.where(four, (2 * p0 + p1) // 3, (p0 + p1) // 2),
                        np.where(four, (p0 + 2 * p1) // 3, 0)], 1)  # fmt: skip
    alphas = np.full((len(c0), 4), 255)
    alphas[:, 3] = np.where(four[:, 0] | (not transparent), 255, 0)
    codes = (bits[:, None] >> (2 * np.arange(16))) & 3
    n = np.arange(len(c0))[:, None]
    px = np.concatenate([colours[n, codes], alphas[n, codes][..., None]], -1)
    bw, bh = (width + 3) // 4, (height + 3) // 4
    img = px.reshape(bh, bw, 4, 4, 4).transpose(0, 2, 1, 3, 4).reshape(bh * 4, bw * 4, 4)
    return img[:height, :width].astype(np.uint8)


# --- reference images ---------------------------------------------------------------------------

EXACT_REFERENCES = [
    ("blp/blp1_jpeg.blp", "blp/blp1_jpeg.png"),
    ("blp/blp2_raw.blp", "blp/blp2_raw.png"),
    ("ati1.dds", "ati1.png"),
    ("bc5_unorm.dds", "bc5_unorm.png"),
    ("bc7-argb-8bpp_MipMaps-1.dds", "bc7-argb-8bpp_MipMaps-1.png"),
    ("dxt1-rgb-4bbp-noalpha_MipMaps-1.dds", "dxt1-rgb-4bbp-noalpha_MipMaps-1.png"),
    ("dxt3-argb-8bbp-explicitalpha_MipMaps-1.dds", "dxt3-argb-8bbp-explicitalpha_MipMaps-1.png"),
    ("dxt5-argb-8bbp-interpolatedalpha_MipMaps-1.dds", "dxt5-argb-8bbp-interpolatedalpha_MipMaps-1.png"),
]


@pytest.mark.corpus
@pytest.mark.parametrize(("texture", "reference"), EXACT_REFERENCES)
def test_decode_matches_reference_exactly(texture, reference):
    got = decode_file(PILLOW_IMAGES + texture)
    want = reference_rgba(reference)
    assert got.dtype == np.uint8 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.corpus
@pytest.mark.parametrize(("name", "transparent"), [("blp2_dxt1", False), ("blp2_dxt1a", True)])
def test_blp2_dxt1_differs_from_pillow_reference_only_by_bit_replication(name, transparent):
    """The BLP2 DXT1 reference PNGs come from Pillow's pure-Python BLP plugin, which expands 5/6-bit
    colour by a bare shift; we decode like a GPU (and like Pillow's DDS path), with bit replication.
    Both are reproduced exactly by one small decoder that differs only in that expansion."""
    path = corpus_path(PILLOW_IMAGES + f"blp/{name}.blp")
    data = path.read_bytes()
    width, height = struct.unpack_from("<2I", data, 12)
    offset = struct.unpack_from("<I", data, 20)[0]
    blocks = data[offset : offset + ((width + 3) // 4) * ((height + 3) // 4) * 8]
    got = decode_texture(data, str(path))
    want = reference_rgba(f"blp/{name}.png")
    np.testing.assert_array_equal(dxt1_reference(blocks, width, height, False, transparent), want)
    np.testing.assert_array_equal(dxt1_reference(blocks, width, height, True, transparent), got)
    np.testing.assert_array_equal(got[..., 3], want[..., 3])
    assert np.abs(got[..., :3].astype(int) - want[..., :3]).max() <= 7


# --- every texture in the corpus ----------------------------------------------------------------

CORPUS_TEXTURES = corpus_files("*.blp", "*.BLP", "*.dds", "*.DDS", "*.tga", "*.TGA")
# Known-corrupt files and the problem their FormatError must name.
CORRUPT = {
    # Pillow's robustness sample: its JPEG frame claims 64512x256 for a 425x256 header.
    PILLOW_IMAGES + "blp/blp1_jpeg2.blp": "JPEG frame is 64512x256, header says 425x256",
}


def header_size(data: bytes) -> tuple[int, int]:
    if data[:4] == b"DDS ":
        height, width = struct.unpack_from("<2I", data, 12)
    else:
        width, height = struct.unpack_from("<2I", data, 12)
    return width, height


@pytest.mark.corpus
@pytest.mark.parametrize("path", CORPUS_TEXTURES, ids=[str(p.relative_to(CORPUS)) for p in CORPUS_TEXTURES])
def test_every_corpus_texture_decodes_with_its_header_size(path):
    rel = str(path.relative_to(CORPUS))
    data = path.read_bytes()
    if rel in CORRUPT:
        with pytest.raises(FormatError) as info:
            decode_texture(data, str(path))
        assert CORRUPT[rel] in str(info.value) and str(path) in str(info.value)
        assert info.value.offset is not None
        return
    image = decode_texture(data, str(path))
    width, height = header_size(data)
    assert image.shape == (height, width, 4) and image.dtype == np.uint8
    assert image.flags.c_contiguous and image.flags.writeable
    assert image.any()  # not a blank decode (Black32.blp is black but opaque)


def test_corpus_has_the_textures_the_brief_names(corpus):
    rels = {str(p.relative_to(corpus)) for p in CORPUS_TEXTURES}
    assert "tdauth__wc3lib/src/blp/test/HumanCampaignCastle.blp" in rels
    assert "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/girl2_diffuse.dds" in rels
    assert len(rels) >= 40


@pytest.mark.corpus
def test_blp1_paletted_corpus_file_has_alpha_and_palette_colours():
    rel = "tdauth__wc3lib/src/blp/test/SELECTION/SelectionCircleLarge.blp"
    data = corpus_path(rel).read_bytes()
    assert struct.unpack_from("<2I", data, 4) == (1, 8)  # paletted, 8-bit alpha
    image = decode_file(rel)
    palette = np.frombuffer(data[156:1180], np.uint8).reshape(256, 4)[:, 2::-1]
    indices = np.frombuffer(data, np.uint8, 128 * 128, 1180)
    alpha = np.frombuffer(data, np.uint8, 128 * 128, 1180 + 128 * 128)
    np.testing.assert_array_equal(image.reshape(-1, 4)[:, :3], palette[indices])
    np.testing.assert_array_equal(image.reshape(-1, 4)[:, 3], alpha)


@pytest.mark.corpus
def test_blp1_jpeg_keeps_alpha_channel_when_alpha_bits_is_8():
    image = decode_file("flowtsohg__mdx-m3-viewer/clients/example/resources/Textures/SmileyGW.blp")
    assert image[0, 0, 3] == 0 and image[128, 128, 3] == 255  # transparent corner, opaque face
    r, g, b = image[128, 30, :3].astype(int)  # the face's edge is yellow: B and R are not swapped
    assert r > 200 and g > 150 and b < 60
    opaque = image[image[..., 3] == 255][:, :3].astype(int).mean(0)
    assert opaque[0] > opaque[2] + 80


# --- synthetic BLP ------------------------------------------------------------------------------

RNG = np.random.default_rng(1234)
PALETTE = RNG.integers(0, 256, 1024, dtype=np.uint8).tobytes()


@pytest.mark.parametrize("alpha_bits", [0, 1, 4, 8])
@pytest.mark.parametrize("version", ["BLP1", "BLP2"])
def test_paletted_blp_alpha_depths(version, alpha_bits):
    width, height = 5, 3  # 15 pixels: packed alpha does not end on a byte boundary
    indices = RNG.integers(0, 256, width * height).tolist()
    top = (1 << alpha_bits) - 1
    alphas = RNG.integers(0, top + 1, width * height).tolist() if alpha_bits else []
    plane = bytes(alphas) if alpha_bits == 8 else pack_alpha(alphas, alpha_bits)
    if version == "BLP1":
        data = blp1_paletted(width, height, PALETTE, indices, plane, alpha_bits)
    else:
        data = blp2(width, height, 1, alpha_bits, 0, bytes(indices) + plane, PALETTE)
    scale = 255 // top if alpha_bits else 0
    expected_alpha = [a * scale for a in alphas] if alpha_bits else [255] * len(indices)
    want = reference_palette_decode(PALETTE, indices, expected_alpha).reshape(height, width, 4)
    np.testing.assert_array_equal(decode_texture(data, f"synthetic.{version}.blp"), want)


def test_blp2_bgra_encoding():
    width, height = 3, 2
    bgra = RNG.integers(0, 256, (height, width, 4), dtype=np.uint8)
    got = decode_texture(blp2(width, height, 3, 8, 8, bgra.tobytes()), "bgra.blp")
    np.testing.assert_array_equal(got, bgra[..., [2, 1, 0, 3]])
    opaque = decode_texture(blp2(width, height, 3, 0, 0, bgra.tobytes()), "bgra.blp")
    assert (opaque[..., 3] == 255).all()


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("alpha_encoding", "dds"),
    [(1, "dxt3-argb-8bbp-explicitalpha_MipMaps-1"), (7, "dxt5-argb-8bbp-interpolatedalpha_MipMaps-1")],
)
def test_blp2_dxt3_and_dxt5_match_the_dds_references(alpha_encoding, dds):
    width, height, payload = dds_payload(dds + ".dds")
    blocks = payload[: (width // 4) * (height // 4) * 16]
    got = decode_texture(blp2(width, height, 2, 8, alpha_encoding, blocks), "dxt.blp")
    np.testing.assert_array_equal(got, reference_rgba(dds + ".png"))


def test_blp2_opaque_dxt1_forces_alpha():
    block = struct.pack("<HHI", 0x0000, 0xFFFF, 0xFFFFFFFF)  # c0 <= c1, every index 3: "transparent"
    opaque = decode_texture(blp2(4, 4, 2, 0, 0, block), "a.blp")
    transparent = decode_texture(blp2(4, 4, 2, 1, 0, block), "b.blp")
    assert (opaque[..., 3] == 255).all() and (transparent[..., 3] == 0).all()


# --- synthetic DDS ------------------------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("dxgi", "source"),
    [
        (71, "dxt1-rgb-4bbp-noalpha_MipMaps-1"),  # BC1_UNORM
        (72, "dxt1-rgb-4bbp-noalpha_MipMaps-1"),  # BC1_UNORM_SRGB (Pillow's DDS plugin rejects it)
        (74, "dxt3-argb-8bbp-explicitalpha_MipMaps-1"),  # BC2_UNORM
        (78, "dxt5-argb-8bbp-interpolatedalpha_MipMaps-1"),  # BC3_UNORM_SRGB
        (80, "ati1"),  # BC4_UNORM
    ],
)
def test_dds_dx10_header_variants(dxgi, source):
    width, height, payload = dds_payload(source + ".dds")
    data = dds_header(width, height, fourcc=b"DX10", dxgi=dxgi) + payload
    np.testing.assert_array_equal(decode_texture(data, "dx10.dds"), reference_rgba(source + ".png"))


@pytest.mark.parametrize(("dxgi", "order"), [(28, [0, 1, 2, 3]), (87, [2, 1, 0, 3]), (91, [2, 1, 0, 3])])
def test_dds_dx10_uncompressed(dxgi, order):
    raw = RNG.integers(0, 256, (3, 5, 4), dtype=np.uint8)
    data = dds_header(5, 3, fourcc=b"DX10", dxgi=dxgi) + raw.tobytes()
    np.testing.assert_array_equal(decode_texture(data, "raw.dds"), raw[..., order])


def scale(v, bits):
    top = (1 << bits) - 1
    return (v * 255 + top // 2) // top


def test_dds_legacy_masks_argb8888_xrgb8888_and_rgb888():
    raw = RNG.integers(0, 256, (2, 3, 4), dtype=np.uint8)  # bytes B, G, R, A
    argb = dds_header(3, 2, 0x41, b"\0\0\0\0", 32, (0xFF0000, 0xFF00, 0xFF, 0xFF000000))
    np.testing.assert_array_equal(decode_texture(argb + raw.tobytes(), "a.dds"), raw[..., [2, 1, 0, 3]])
    xrgb = dds_header(3, 2, 0x40, b"\0\0\0\0", 32, (0xFF0000, 0xFF00, 0xFF, 0xFF000000))
    got = decode_texture(xrgb + raw.tobytes(), "x.dds")  # no ALPHAPIXELS flag: alpha mask ignored
    np.testing.assert_array_equal(got[..., :3], raw[..., [2, 1, 0]])
    assert (got[..., 3] == 255).all()
    rgb = dds_header(3, 2, 0x40, b"\0\0\0\0", 24, (0xFF0000, 0xFF00, 0xFF, 0))
    got = decode_texture(rgb + raw[..., :3].tobytes(), "rgb.dds")
    np.testing.assert_array_equal(got[..., :3], raw[..., [2, 1, 0]])
    fourcc21 = dds_header(3, 2, 0x4, (21).to_bytes(4, "little"))  # D3DFMT_A8R8G8B8 as a fourCC
    np.testing.assert_array_equal(decode_texture(fourcc21 + raw.tobytes(), "f.dds"), raw[..., [2, 1, 0, 3]])


def test_dds_legacy_masks_r5g6b5_a1r5g5b5_luminance_and_alpha():
    px = RNG.integers(0, 1 << 16, (2, 3)).astype("<u2")
    got = decode_texture(dds_header(3, 2, 0x40, b"\0\0\0\0", 16, (0xF800, 0x07E0, 0x001F, 0)) + px.tobytes(), "565")
    v = px.astype(int)
    want = np.stack([scale(v >> 11, 5), scale((v >> 5) & 63, 6), scale(v & 31, 5), np.full_like(v, 255)], -1)
    np.testing.assert_array_equal(got, want)
    got = decode_texture(dds_header(3, 2, 0x41, b"\0\0\0\0", 16, (0x7C00, 0x03E0, 0x1F, 0x8000)) + px.tobytes(), "1555")
    assert set(np.unique(got[..., 3])) <= {0, 255}
    np.testing.assert_array_equal(got[..., 3], (v >> 15) * 255)
    grey = RNG.integers(0, 256, (2, 3), dtype=np.uint8)
    got = decode_texture(dds_header(3, 2, 0x20000, b"\0\0\0\0", 8, (0xFF, 0, 0, 0)) + grey.tobytes(), "l8.dds")
    np.testing.assert_array_equal(got[..., :3], np.repeat(grey[..., None], 3, -1))
    got = decode_texture(dds_header(3, 2, 0x2, b"\0\0\0\0", 8, (0, 0, 0, 0xFF)) + grey.tobytes(), "a8.dds")
    np.testing.assert_array_equal(got[..., 3], grey)
    assert (got[..., :3] == 0).all()


def test_dds_block_formats_with_sizes_not_multiple_of_four():
    blocks = RNG.integers(0, 256, 2 * 1 * 8, dtype=np.uint8).tobytes()  # 5x3 -> 2x1 blocks
    image = decode_texture(dds_header(5, 3) + blocks, "odd.dds")
    assert image.shape == (3, 5, 4)
    full = decode_texture(dds_header(8, 4) + blocks, "full.dds")
    np.testing.assert_array_equal(image, full[:3, :5])


# --- PNG and TGA --------------------------------------------------------------------------------


def pillow_bytes(image: Image.Image, fmt: str, **params) -> bytes:
    out = BytesIO()
    image.save(out, fmt, **params)
    return out.getvalue()


@pytest.mark.parametrize("rle", [False, True])
def test_tga_rgba_and_rle_round_trip(rle):
    rgba = RNG.integers(0, 256, (7, 5, 4), dtype=np.uint8)
    data = pillow_bytes(Image.fromarray(rgba), "TGA", compression="tga_rle" if rle else None)
    np.testing.assert_array_equal(decode_texture(data, "Textures\\x.tga"), rgba)


def test_tga_is_recognised_without_its_extension_and_grey_is_replicated():
    grey = RNG.integers(0, 256, (4, 6), dtype=np.uint8)
    data = pillow_bytes(Image.fromarray(grey), "TGA")
    got = decode_texture(data, "no_extension")
    np.testing.assert_array_equal(got[..., :3], np.repeat(grey[..., None], 3, -1))
    assert (got[..., 3] == 255).all()


def test_png_rgba_and_paletted_with_transparency():
    rgba = RNG.integers(0, 256, (3, 4, 4), dtype=np.uint8)
    np.testing.assert_array_equal(decode_texture(pillow_bytes(Image.fromarray(rgba), "PNG"), "a.png"), rgba)
    paletted = Image.new("P", (2, 2))
    paletted.putpalette([255, 0, 0, 0, 255, 0])
    paletted.putdata([0, 1, 1, 0])
    got = decode_texture(pillow_bytes(paletted, "PNG", transparency=1), "p.png")
    np.testing.assert_array_equal(got[0, 0], [255, 0, 0, 255])
    np.testing.assert_array_equal(got[0, 1], [0, 255, 0, 0])


def test_installed_pillow_has_the_decoders_we_use():
    """BLP1 JPEG needs Pillow's libjpeg; DDS and BLP2 DXT need its C "bcn" decoder (BC1-BC7)."""
    from PIL import features

    assert features.check("jpg")
    for mode, n, pixel_format in [("RGBA", 1, "DXT1"), ("L", 4, "BC4"), ("RGB", 5, "BC5"), ("RGBA", 7, "BC7")]:
        size = 8 if n in (1, 4) else 16
        assert Image.frombytes(mode, (4, 4), bytes(size), "bcn", n, pixel_format).size == (4, 4)


def test_registry_knows_the_formats():
    assert registered_formats() == ["BLP", "DDS", "PNG", "TGA"]
