"""Counts, sizes and sides read from a file never size a loop or an allocation before they are
checked (issue 23, item 1): each case is a file built here with one hostile header field, decoded
the way the renderer decodes it; the answer is the right pixels (an advisory field clamped or
ignored) or a FormatError naming the file, the field, its offset and the problem. The DDS mip
count of 0xFFFFFFFF and the other "huge allocation from a tiny file" cases run in a child process
under a small RLIMIT_DATA, so a loop or an allocation sized by the count fails there instead of
filling this machine."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest
from conftest import ROOT
from test_halo_tagbuild import bitmap_tag
from test_textures_decode import blp2, dds_header

from renderer.errors import FormatError
from renderer.formats.halo import decode_bitmap_tag
from renderer.formats.textures import decode_texture, decode_texture_chain, mips

DATA_CAP_MIB = 160  # private memory of the child: the interpreter, numpy and Pillow fit; a 256 MiB image does not

CHILD = """
import hashlib, json, sys
from renderer.formats.textures import decode_texture_chain
from renderer.errors import FormatError
data = open(sys.argv[1], "rb").read()
try:
    chain = decode_texture_chain(data, sys.argv[2])
    print(json.dumps({"mode": chain.mode, "levels": [list(x.shape) for x in chain.levels],
                      "pixels": [hashlib.sha256(x.tobytes()).hexdigest() for x in chain.levels]}))
except FormatError as e:
    print(json.dumps({"error": str(e), "field": e.where, "offset": e.offset}))
"""


def decode_capped(tmp_path, data: bytes, name: str) -> dict:
    """decode_texture_chain(data, name) in a child under RLIMIT_DATA = DATA_CAP_MIB: its outcome, or
    the child's failure (a MemoryError traceback) as an assertion error."""
    src = tmp_path / "texture.bin"
    src.write_bytes(data)
    cap = DATA_CAP_MIB << 20

    def limit():
        resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(src), name], capture_output=True, text=True,
                          preexec_fn=limit, env=env, cwd=str(ROOT), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def digests(chain) -> list[str]:
    """What the child reports of a chain's pixels: the sha256 of each level."""
    return [hashlib.sha256(level.tobytes()).hexdigest() for level in chain.levels]


# -- DDS -------------------------------------------------------------------------------------------

def dxt1_chain(side: int = 8, levels: int = 4, mip_count: int = 4) -> bytes:
    """A DXT1 DDS of side x side storing `levels` levels (random blocks), whose header says `mip_count`."""
    rng = np.random.default_rng(side * 100 + levels)
    payload = b"".join(rng.integers(0, 256, ((max(1, side >> k) + 3) // 4) ** 2 * 8, np.uint8).tobytes()
                       for k in range(levels))
    head = bytearray(dds_header(side, side))
    struct.pack_into("<I", head, 28, mip_count)
    return bytes(head) + payload


def test_a_dds_mip_count_of_0xffffffff_is_clamped_to_the_levels_the_sides_allow(tmp_path):
    """The reported case: the loop over the raw count grew memory without bound and never ended."""
    out = decode_capped(tmp_path, dxt1_chain(mip_count=0xFFFFFFFF), "Textures\\Huge.dds")
    assert out == decode_capped(tmp_path, dxt1_chain(mip_count=4), "Textures\\Huge.dds")
    assert out["mode"] == mips.STORED and out["levels"] == [[8, 8, 4], [4, 4, 4], [2, 2, 4], [1, 1, 4]]
    huge, exact = decode_texture_chain(dxt1_chain(mip_count=0xFFFFFFFF), "a.dds"), \
        decode_texture_chain(dxt1_chain(mip_count=4), "a.dds")
    for a, b in zip(huge.levels, exact.levels, strict=True):
        assert np.array_equal(a, b)


def test_a_dds_whose_huge_mip_count_is_not_in_the_file_keeps_what_is_there(tmp_path):
    out = decode_capped(tmp_path, dxt1_chain(side=16, levels=2, mip_count=0x7FFFFFFF), "t.dds")
    assert out == {"mode": mips.STORED, "levels": [[16, 16, 4], [8, 8, 4]], "pixels": digests(
        decode_texture_chain(dxt1_chain(side=16, levels=2, mip_count=2), "t.dds"))}
    out = decode_capped(tmp_path, dxt1_chain(side=16, levels=1, mip_count=0xFFFFFFFF), "t.dds")
    assert out["mode"] == mips.NONE and out["levels"] == [[16, 16, 4]]


@pytest.mark.parametrize("offset, value", [(12, 0xFFFFFFFF), (16, 0xFFFFFFFF), (12, 0x10000), (16, 0),
                                           (12, 0x4000_0000)])
def test_huge_dds_sides_are_refused_naming_the_field(tmp_path, offset, value):
    data = bytearray(dxt1_chain())
    struct.pack_into("<I", data, offset, value)
    out = decode_capped(tmp_path, bytes(data), "Textures\\Side.dds")
    assert out["field"] == "DDS height/width" and out["offset"] == 12, out
    assert "Textures\\Side.dds" in out["error"] and "image is" in out["error"], out


@pytest.mark.parametrize("offset", [20, 24])  # pitch, depth: not read (the pitch is computed, one slice)
def test_advisory_dds_fields_are_ignored(offset):
    data = bytearray(dxt1_chain())
    struct.pack_into("<I", data, offset, 0xFFFFFFFF)
    assert np.array_equal(decode_texture(bytes(data), "t.dds"), decode_texture(dxt1_chain(), "t.dds"))


def test_a_dx10_array_size_of_0xffffffff_decodes_the_first_slice():
    pixels = bytes(range(256)) * 1  # 8x8 R8G8B8A8: 256 bytes
    good = dds_header(8, 8, fourcc=b"DX10", dxgi=28) + pixels
    bad = bytearray(good)
    struct.pack_into("<I", bad, 140, 0xFFFFFFFF)  # array size
    struct.pack_into("<I", bad, 28, 0xFFFFFFFF)  # and the mip count
    assert np.array_equal(decode_texture(bytes(bad), "t.dds"), decode_texture(good, "t.dds"))
    with pytest.raises(FormatError) as e:
        decode_texture(bytes(bad[:128]) + struct.pack("<I", 0xFFFFFFFF) + bytes(bad[132:]), "t.dds")
    assert e.value.offset == 128 and "DXGI format 4294967295 is not supported" in str(e.value)


# -- BLP, TGA, PNG ---------------------------------------------------------------------------------

def blp2_bgra_chain(side: int = 8) -> bytes:
    """A BLP2 of raw BGRA with every level down to 1x1 stored."""
    levels = [bytes([k * 16 % 256]) * (max(1, side >> k) ** 2 * 4) for k in range(side.bit_length())]
    data = bytearray(blp2(side, side, 3, 8, 0, b"".join(levels)))
    data[11] = 1  # hasMips
    at = 20 + 128 + 1024
    for k, level in enumerate(levels):
        struct.pack_into("<I", data, 20 + 4 * k, at)
        struct.pack_into("<I", data, 84 + 4 * k, len(level))
        at += len(level)
    return bytes(data)


@pytest.mark.parametrize("slot", [1, 2, 3])
@pytest.mark.parametrize("table", [20, 84])  # offsets, sizes
def test_a_huge_blp_mip_offset_or_size_ends_the_chain_there(slot, table):
    data = bytearray(blp2_bgra_chain())
    struct.pack_into("<I", data, table + 4 * slot, 0xFFFFFFFF)
    chain = decode_texture_chain(bytes(data), "t.blp")
    full = decode_texture_chain(blp2_bgra_chain(), "t.blp")
    assert len(full.levels) == 4
    kept = slot if table == 20 else 4  # the size of a BGRA level is computed, not read
    assert len(chain.levels) == kept
    assert all(np.array_equal(a, b) for a, b in zip(chain.levels, full.levels[:kept], strict=True))


def test_a_huge_blp_level_0_offset_or_side_is_refused_naming_the_field(tmp_path):
    data = bytearray(blp2_bgra_chain())
    struct.pack_into("<I", data, 20, 0xFFFFFFF0)
    out = decode_capped(tmp_path, bytes(data), "Textures\\Far.blp")
    assert out["field"] == "BLP2 mip 0 BGRA data" and out["offset"] == 0xFFFFFFF0, out
    for at in (12, 16):
        data = bytearray(blp2_bgra_chain())
        struct.pack_into("<I", data, at, 0xFFFFFFFF)
        out = decode_capped(tmp_path, bytes(data), "Textures\\Wide.blp")
        assert out["field"] == "BLP2 width/height" and "refused" in out["error"], out


def tga(width: int, height: int, image_type: int, body: bytes, id_length: int = 0, map_length: int = 0) -> bytes:
    map_type = 1 if image_type in (1, 9) else 0
    return struct.pack("<3BHHB4xHHBB", id_length, map_type, image_type, 0, map_length, 24 if map_type else 0,
                       width, height, 8 if map_type else 24, 0) + body


def test_an_rle_tga_too_short_for_its_sides_is_refused_before_pillow_allocates(tmp_path):
    """16384 x 4096 RGB from 40 bytes of packets: Pillow allocated 256 MiB before finding the end."""
    out = decode_capped(tmp_path, tga(16384, 4096, 10, bytes([0xFF, 1, 2, 3]) * 10), "Textures\\Rle.tga")
    assert out["field"] == "TGA pixel data" and out["offset"] == 18, out
    assert "40 bytes of RLE packets cannot hold 16384x4096 pixels" in out["error"], out
    # a real RLE image: a 16-pixel run per row of a 16x16 (Pillow wants runs within rows)
    image = decode_texture(tga(16, 16, 10, bytes([0x8F, 10, 20, 30, 0x8F, 40, 50, 60]) * 8), "t.tga")
    assert image.shape == (16, 16, 4) and {tuple(p) for p in image.reshape(-1, 4)} == {(30, 20, 10, 255),
                                                                                       (60, 50, 40, 255)}


@pytest.mark.parametrize("id_length, map_length", [(255, 0), (0, 65535)])
def test_a_huge_tga_id_or_colour_map_is_refused(id_length, map_length):
    image_type = 1 if map_length else 2
    with pytest.raises(FormatError) as e:
        decode_texture(tga(4, 4, image_type, bytes(64), id_length, map_length), "Textures\\Id.tga")
    assert e.value.where == "TGA image ID and colour map" and e.value.offset == 18


def png(width: int, height: int, idat: bytes) -> bytes:
    def chunk(tag, body):
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
            + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def test_a_png_too_small_to_inflate_to_its_sides_is_refused_before_pillow_allocates(tmp_path):
    out = decode_capped(tmp_path, png(16384, 4096, zlib.compress(bytes(1000))), "Textures\\Bomb.png")
    assert out["field"] == "PNG IHDR width/height" and out["offset"] == 16, out
    assert "more than deflate can make of the" in out["error"], out
    # the most compressible real image of that size still decodes (a flat 256x256 from ~300 bytes)
    flat = png(256, 256, zlib.compress(bytes(256 * (1 + 256 * 4)), 9))
    assert decode_texture(flat, "t.png").shape == (256, 256, 4)


def test_a_memory_error_inside_pillow_is_not_bad_input(monkeypatch):
    """The worker's memory budget (farm.run.budget) must see a MemoryError, not a FormatError."""
    from PIL import Image

    def no_memory(*a, **k):
        raise MemoryError("cap")

    monkeypatch.setattr(Image.Image, "load", no_memory)
    with pytest.raises(MemoryError):
        decode_texture(png(4, 4, zlib.compress(bytes(4 * 17))), "t.png")


# -- Halo bitmaps ----------------------------------------------------------------------------------

def test_a_huge_white_halo_bitmap_is_refused_before_it_is_filled():
    """A "white" bitmap has no pixel data: its sides alone sized a 1 GiB array."""
    with pytest.raises(FormatError) as e:
        decode_bitmap_tag(bitmap_tag(16384, 16384, 0, b"", data_type=3), "w.bitmap")
    assert e.value.offset is not None and "size 16384x16384 is more than 67108864 pixels" in str(e.value)
    assert (decode_bitmap_tag(bitmap_tag(4, 2, 0, b"", data_type=3), "w.bitmap") == 255).all()


# -- parent chains ---------------------------------------------------------------------------------

def chain_model(n: int):
    from renderer.model import Helper, Model

    model = Model()
    model.helpers = [Helper(name=f"h{i}", object_id=i, parent_id=i - 1) for i in range(n)]
    model.pivots = np.zeros((n, 3), np.float32)
    return model


def test_a_parent_chain_deeper_than_max_depth_is_cut_into_roots_with_a_note():
    """A 100,000-node chain: every pose walked 100,000 levels (2 s a pose, 100 poses per effects frame)."""
    from renderer.anim.skeleton import MAX_DEPTH, Skeleton

    n = 100_000
    sk = Skeleton(chain_model(n))
    assert int(sk.depth.max()) == MAX_DEPTH and len(sk.levels) == MAX_DEPTH + 1
    roots = np.flatnonzero(sk.parents == n)
    assert roots.tolist() == list(range(0, n, MAX_DEPTH + 1))
    assert any(f"more than {MAX_DEPTH} levels below a root" in note for note in sk.notes), sk.notes
    short = Skeleton(chain_model(MAX_DEPTH + 1))  # exactly MAX_DEPTH + 1 levels: nothing is cut
    assert short.parents.tolist() == [short.count, *range(MAX_DEPTH)] and not short.notes
    # levels hold the same rows in the same order as one scan per depth did
    for d, (plain, parents, flagged, _) in enumerate(sk.levels):
        assert plain.tolist() == np.flatnonzero(sk.depth == d).tolist() and not len(flagged)
        assert parents.tolist() == sk.parents[plain].tolist()


def test_a_ribbon_with_a_huge_emission_rate_keeps_at_most_max_edges():
    """Fuzz case 67879 of seed 1003: emission rate 3.4e38 sized an 85-million-edge trail (23 GiB)."""
    from renderer.fx.trail import MAX_EDGES, Trail

    trail = Trail(lifespan_s=60.0, rate=3.4e38)
    for step in range(5):
        trail.advance(step * 20.0, (0, 0, 1), (0, 0, -1), (1, 1, 1), 1.0)
        assert trail.hi - trail.lo <= MAX_EDGES
    assert trail.hi - trail.lo == MAX_EDGES and len(trail._birth) <= 2 * MAX_EDGES
    assert trail._birth[trail.hi - 1] == 80.0  # the newest edges are kept
