"""Stored BLP / DDS mip levels (renderer.rules.TEXTURE_MIPMAPS): which chains are uploaded, and the
pixels of a strongly minified quad that shows whether the stored levels were used."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from render_util import layer, quad, renderer, write_model

from renderer.formats import load_model
from renderer.formats.mdx import save_mdx
from renderer.formats.textures import decode_texture, decode_texture_chain, mips
from renderer.frame import FrameSpec
from renderer.rules import RENDER_RULE, TEXTURE_MIPMAPS

RED, GREEN = (0, 0, 255, 0), (0, 255, 0, 0)  # palette entries, B G R (alpha byte unused)


def blp1_levels(width: int, height: int, colours, fake: bool = False, has_mips: bool = True) -> bytes:
    """A paletted BLP1 (alpha 0 bits) whose level k is a solid colour: palette index k."""
    palette = bytearray(1024)
    for i, c in enumerate(colours):
        palette[4 * i : 4 * i + 4] = bytes(c)
    offsets, sizes, body = [0] * 16, [0] * 16, bytearray()
    at = 156 + 1024
    for k in range(len(colours)):
        w, h = mips.level_size(width, height, k)
        pixels = bytes([k]) * (w * h)
        offsets[k], sizes[k] = at + len(body), len(pixels)
        body += pixels
    if fake:
        offsets[1:len(colours)] = [offsets[0]] * (len(colours) - 1)
    head = struct.pack("<4s6I", b"BLP1", 1, 0, width, height, 4, 1 if has_mips else 0)
    return head + struct.pack("<16I", *offsets) + struct.pack("<16I", *sizes) + bytes(palette) + bytes(body)


def dds_levels(width: int, height: int, colours_rgba, count: int | None = None) -> bytes:
    """An uncompressed A8R8G8B8 DDS whose level k is a solid colour."""
    count = len(colours_rgba) if count is None else count
    head = struct.pack("<4s7I", b"DDS ", 124, 0x2100F, height, width, width * 4, 0, count)
    head += bytes(44)
    head += struct.pack("<2I4s5I", 32, 0x41, b"\0\0\0\0", 32, 0x00FF0000, 0x0000FF00, 0x000000FF, 0xFF000000)
    head += bytes(20)
    body = bytearray()
    for k, (r, g, b, a) in enumerate(colours_rgba):
        w, h = mips.level_size(width, height, k)
        body += bytes([b, g, r, a]) * (w * h)
    return head + bytes(body)


def full(width, height, first, rest):
    return [first] + [rest] * (mips.full_chain_length(width, height) - 1)


def test_the_rule_is_named_and_in_the_trace_rule():
    assert TEXTURE_MIPMAPS == "stored" and "mipmaps stored" in RENDER_RULE


def test_a_complete_distinct_blp_chain_is_stored():
    chain = decode_texture_chain(blp1_levels(8, 4, full(8, 4, RED, GREEN)), "a.blp")
    assert chain.mode == mips.STORED and [lv.shape[:2] for lv in chain.levels] == [(4, 8), (2, 4), (1, 2), (1, 1)]
    assert chain.levels[0][0, 0].tolist() == [255, 0, 0, 255] and chain.levels[3][0, 0].tolist() == [0, 255, 0, 255]
    assert np.array_equal(chain.top, decode_texture(blp1_levels(8, 4, full(8, 4, RED, GREEN)), "a.blp"))


@pytest.mark.parametrize("data", [
    blp1_levels(8, 8, full(8, 8, RED, GREEN), fake=True),  # SmileyGW.blp: one offset repeated
    blp1_levels(8, 8, [RED]),  # one level
    blp1_levels(8, 8, full(8, 8, RED, GREEN), has_mips=False),
    blp1_levels(6, 6, full(6, 6, RED, GREEN)),  # not a power of two
], ids=["fake", "one-level", "hasMipmaps-0", "npot"])
def test_blps_the_viewer_does_not_mipmap(data):
    chain = decode_texture_chain(data, "b.blp")
    assert chain.mode == mips.NONE and len(chain.levels) == 1


def test_a_chain_stops_at_a_level_that_is_cut_off():
    data = blp1_levels(8, 8, full(8, 8, RED, GREEN))
    chain = decode_texture_chain(data[:-2], "c.blp")  # the 1x1 level is missing, the 2x2 one cut
    assert chain.mode == mips.STORED and len(chain.levels) == 2


def test_dds_chains():
    colours = [(255, 0, 0, 255), (0, 255, 0, 255), (0, 0, 255, 255), (9, 9, 9, 255)]
    chain = decode_texture_chain(dds_levels(8, 8, colours), "d.dds")
    assert chain.mode == mips.STORED
    assert [lv[0, 0, :3].tolist() for lv in chain.levels] == [list(c[:3]) for c in colours]
    assert decode_texture_chain(dds_levels(8, 8, colours[:1]), "e.dds").mode == mips.NONE
    assert decode_texture_chain(dds_levels(6, 6, colours[:3]), "f.dds").mode == mips.STORED  # NPOT DDS: as stored


def test_tga_mipmaps_are_generated(tmp_path):
    from PIL import Image

    Image.new("RGBA", (4, 4), (1, 2, 3, 255)).save(tmp_path / "t.tga")
    assert decode_texture_chain((tmp_path / "t.tga").read_bytes(), "t.tga").mode == mips.GENERATE


def minified(tmp_path, name: str, data: bytes, ext: str = "blp") -> list[int]:
    """A quad far from the camera (about 2 pixels across) textured by `data`; the centre pixel."""
    path = write_model(tmp_path, name, [layer(0, flags=0x1)], {"dummy.tga": np.zeros((1, 1, 4), np.uint8)},
                       [quad(half=20.0)])
    (tmp_path / f"{name}.{ext}").write_bytes(data)
    m = load_model(path)
    m.textures[0].path = f"{name}.{ext}"
    save_mdx(m, path)
    f = renderer().render(load_model(path), FrameSpec(width=64, height=64, camera="2000,0,0:0,0,0:0,0,1:40",
                                                    background="#000000"))
    return f.rgba[32, 32, :3].astype(int).tolist()


def test_stored_levels_are_what_a_minified_quad_shows(tmp_path):
    size = 64
    assert minified(tmp_path, "stored", blp1_levels(size, size, full(size, size, RED, GREEN))) == [0, 255, 0]
    # Fake levels: no mipmapping, level 0 (red) is sampled even when minified.
    assert minified(tmp_path, "fake", blp1_levels(size, size, full(size, size, RED, GREEN), fake=True)) == [255, 0, 0]
    colours = [(255, 0, 0, 255)] + [(0, 0, 255, 255)] * (mips.full_chain_length(size, size) - 1)
    assert minified(tmp_path, "dds", dds_levels(size, size, colours), "dds") == [0, 0, 255]
