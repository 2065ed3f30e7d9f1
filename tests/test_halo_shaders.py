"""Shader references on hand-made tag trees: lookup under the tag root, blend modes, flat colours."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from test_halo_tagbuild import bitmap_tag, header, model_tag, shader_chicago, shader_model, uncompressed

from renderer.assets.search import AssetSearch
from renderer.formats import load
from renderer.formats.halo.shaders import BLEND_FUNCTIONS, flat_color

RED = bitmap_tag(1, 1, 11, bytes([0, 0, 255, 255]))  # one red A8R8G8B8 texel


def bitmap_image(loaded, index):
    """The image the renderer draws texture `index` of a Halo model with (its context's texture source)."""
    model, context = loaded
    return context.texture_source.image(model, index, AssetSearch([], []))


def tree(tmp_path, files: dict[str, bytes], shaders, parts=None, **kw):
    """`load_tree`'s model."""
    return load_tree(tmp_path, files, shaders, parts, **kw).model


def load_tree(tmp_path, files: dict[str, bytes], shaders, parts=None, **kw):
    """Write files under tmp/tags and a model at tags/m/m.gbxmodel; return it loaded, with its context."""
    root = tmp_path / "tags"
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    u = uncompressed([(0, 0, 0), (1, 0, 0), (0, 1, 0)], uvs=[(0, 0), (1, 0), (0, 1)])
    parts = parts or [{"shader": i, "uncompressed": u, "strip": [0, 1, 2]} for i in range(len(shaders))]
    model = root / "m" / "m.gbxmodel"
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_bytes(model_tag(shaders=shaders, geometries=[parts], **kw))
    return load(model)


def test_shader_model_opaque_alpha_tested_two_sided(tmp_path):
    loaded = load_tree(tmp_path, {
        "s/opaque.shader_model": shader_model("b\\red", flags=4),
        "s/cutout.shader_model": shader_model("b\\red", flags=2),
        "b/red.bitmap": RED,
    }, [(b"soso", "s\\opaque"), (b"soso", "s\\cutout")])
    m = loaded.model
    assert not m.diagnostics
    a, b = (mat.layers[0] for mat in m.materials)
    assert (a.filter_mode, a.shading_flags) == (0, 0)
    assert (b.filter_mode, b.shading_flags) == (1, 0x10)
    assert a.texture_id == b.texture_id == 0 and len(m.textures) == 1  # one texture per distinct bitmap
    assert m.textures[0].path == "b\\red.bitmap" and m.textures[0].flags == 3
    assert bitmap_image(loaded, 0).tolist() == [[[255, 0, 0, 255]]]


@pytest.mark.parametrize("blend", range(len(BLEND_FUNCTIONS)))
def test_transparent_chicago_blend_functions(tmp_path, blend):
    m = tree(tmp_path, {"s/t.shader_transparent_chicago": shader_chicago("b\\red", blend=blend, flags=4,
                                                                          map_flags=4),
                        "b/red.bitmap": RED}, [(b"schi", "s\\t")])
    layer = m.materials[0].layers[0]
    assert layer.filter_mode == (2, 5, 6, 3, 5, 5, 3, 4)[blend]
    assert m.info["shaders"][0]["blend"] == BLEND_FUNCTIONS[blend]
    assert layer.shading_flags == 0x10 | 0x1  # two sided, unshaded
    assert m.textures[0].flags == 2  # u clamped: no WrapWidth


def test_shader_map_scale_multiplies_uvs(tmp_path):
    m = tree(tmp_path, {"s/a.shader_model": shader_model("b\\red", map_scale=(2.0, 0.0)), "b/red.bitmap": RED},
             [(b"soso", "s\\a")], base_map_scale=(3.0, 0.5))
    assert np.allclose(m.geosets[0].uv_sets[0], [(0, 0), (6, 0), (0, 0.5)])


def test_lookup_is_case_insensitive(tmp_path):
    m = tree(tmp_path, {"Shaders/Armor.SHADER_MODEL": shader_model("BITMAPS\\Red"), "bitmaps/red.bitmap": RED},
             [(b"soso", "shaders\\armor")])
    assert m.info["shaders"][0]["resolved"] and m.info["textures"][0]["file"]
    assert not m.diagnostics


def test_missing_unsupported_and_refused_shaders(tmp_path):
    outside = tmp_path / "evil.shader_model"
    outside.write_bytes(shader_model("b\\red"))
    loaded = load_tree(tmp_path, {"s/glass.shader_transparent_glass": b"whatever",
                                  "s/nomap.shader_model": shader_model("")},
                       [(b"soso", "s\\gone"), (b"sgla", "s\\glass"), (b"soso", "..\\evil"), (b"soso", "s\\nomap")])
    m = loaded.model
    msgs = [d.message for d in m.diagnostics]
    assert any("'s\\\\gone.shader_model' not found" in x for x in msgs)
    assert any("is not read" in x for x in msgs)
    assert any("refused" in x and "parent reference" in x for x in msgs)
    assert any("has no base map" in x for x in msgs)
    assert [s["resolved"] for s in m.info["shaders"]] == [False, False, False, True]
    assert all(t.path == "" for t in m.textures)
    for i, s in enumerate(m.info["shaders"]):
        assert tuple(s["flat_color"]) == flat_color(s["path"])
        assert tuple(bitmap_image(loaded, m.materials[i].layers[0].texture_id)[0, 0]) == flat_color(s["path"])


def test_bad_shader_and_bitmap_tags_are_diagnostics(tmp_path):
    bad_shader = shader_model("b\\red")[:200]
    bad_bitmap = RED[:-60]
    m = tree(tmp_path, {"s/cut.shader_model": bad_shader, "s/ok.shader_model": shader_model("b\\red"),
                        "b/red.bitmap": bad_bitmap}, [(b"soso", "s\\cut"), (b"soso", "s\\ok")])
    msgs = [d.message for d in m.diagnostics]
    assert any("shader tag is bad" in x for x in msgs)
    assert any("base map is bad" in x for x in msgs)
    assert not any(t["file"] for t in m.info["textures"])


def test_flat_colour_formula():
    crc = zlib.crc32(b"characters\\marine\\shaders\\marine_body")
    want = (64 + (crc & 0xFF) * 160 // 256, 64 + ((crc >> 8) & 0xFF) * 160 // 256,
            64 + ((crc >> 16) & 0xFF) * 160 // 256, 255)
    assert flat_color("Characters\\Marine\\Shaders\\Marine_Body") == want


def test_transparent_generic_first_map(tmp_path):
    body = bytearray(108)
    struct.pack_into(">HH", body, 42, 0, 0)
    body[84:96] = struct.pack(">III", 1, 0, 0)
    m_ = bytearray(100)
    struct.pack_into(">H", m_, 0, 4)  # v clamped
    struct.pack_into(">4f", m_, 4, 2.0, 2.0, 0.5, 0.0)
    m_[28:44] = struct.pack(">4sIII", b"bitm", 0, 5, 0xFFFFFFFF)
    sotr = header(b"sotr", 1, bytes(body) + bytes(m_) + b"b\\red\0")
    m = tree(tmp_path, {"s/g.shader_transparent_generic": sotr, "b/red.bitmap": RED}, [(b"sotr", "s\\g")])
    assert not m.diagnostics
    assert m.materials[0].layers[0].filter_mode == 2 and m.textures[0].flags == 1
    assert np.allclose(m.geosets[0].uv_sets[0], [(0.5, 0), (2.5, 0), (0.5, 2)])
