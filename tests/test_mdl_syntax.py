"""MDL syntax and semantics without the corpus: floats, flags, every record in every version, extensions."""

from __future__ import annotations

import struct
from decimal import Decimal

import numpy as np
import pytest
from mdx_build import everything
from test_mdl import bit_diff

from renderer import rules
from renderer.errors import FormatError
from renderer.formats import load_model, save_model
from renderer.formats.mdl import read_mdl, save_mdl, write_mdl
from renderer.formats.mdl.text import fmt_float, fmt_floats
from renderer.formats.mdl.tokens import tokenize
from renderer.formats.mdx import read_mdx, write_mdx
from renderer.model import (
    Bone,
    Geoset,
    GeosetAnimation,
    Helper,
    Layer,
    Light,
    Material,
    Model,
    ParticleEmitter2,
    Texture,
    TextureSlot,
    Track,
    UnknownChunk,
    key_dtype,
    same,
)

F32 = struct.Struct("<f")


def f32_bits(strings) -> np.ndarray:
    return np.array(strings, dtype=np.float64).astype(np.float32).view(np.uint32)


def track(tag, frames, values, interpolation=1, gsid=-1):
    keys = np.zeros(len(frames), key_dtype(tag, interpolation))
    keys["frame"] = frames
    keys["value"] = values
    if interpolation >= 2:
        keys["in_tan"] = values
        keys["out_tan"] = values
    return Track(tag, interpolation, gsid, keys)


def round_trip(m: Model, **kw) -> Model:
    back = read_mdl(write_mdl(m), "t.mdl", **kw)
    assert same(back, m), bit_diff(m, back)
    assert bit_diff(m, back) is None
    return back


# -- floats -----------------------------------------------------------------------------------
def test_floats_are_written_shortest_and_read_back_bit_for_bit():
    assert [fmt_float(x) for x in (0.1, 1.0, 30.0, 1 / 3, -0.0, 2.5e-6, 3.4028234663852886e38)] == [
        "0.1", "1", "30", "0.33333334", "-0", "2.5e-06", "3.4028235e+38"]
    assert fmt_float(float("inf")) == "inf" and fmt_float(-float("inf")) == "-inf"
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32)
    bits[:8] = [0, 0x80000000, 1, 0x807FFFFF, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x00800000]
    vals = bits.view(np.float32)
    finite = np.isfinite(vals) | np.isinf(vals)
    text = fmt_floats(vals)
    assert np.array_equal(f32_bits([t for t, ok in zip(text, finite, strict=True) if ok]), bits[finite])
    # Bulk and scalar formatting agree, and use as few digits as numpy's shortest repr (or one more
    # at a power-of-two boundary).
    sample = vals[finite][:5000]
    assert fmt_floats(sample) == [fmt_float(float(v)) for v in sample]
    def digits(s: str) -> int:
        return len(Decimal(s).normalize().as_tuple().digits)

    for v, s in zip(sample[:3000], fmt_floats(sample[:3000]), strict=True):
        if np.isfinite(v) and v != 0:
            assert digits(s) <= digits(np.format_float_scientific(v, unique=True)) + 1, (v, s)


def test_nan_keeps_its_sign_and_odd_number_spellings_parse():
    assert fmt_floats(np.array([np.nan, -np.nan], np.float32)) == ["nan", "-nan"]
    assert tokenize("1.#INF00 -1.#IND00 +5 .5 5. 1e3 0000 NaN") == [
        "1.#INF00", "-1.#IND00", "+5", ".5", "5.", "1e3", "0000", "NaN"]
    m = read_mdl('Model "m" { MinimumExtent { 1.#INF00, -1.#IND00, +5 }, BoundsRadius .5, BlendTime 1e3, }')
    assert m.extent.min[0] == float("inf") and m.extent.min[1] != m.extent.min[1] and m.extent.min[2] == 5.0
    assert m.extent.radius == 0.5 and m.blend_time == 1000


def test_comments_commas_and_colons_are_separators():
    m = read_mdl("""// header
    Version { FormatVersion 900 } /* a block
    comment */ Model "x" { BlendTime 7 } // trailing""")
    assert m.version == 900 and m.blend_time == 7 and m.diagnostics == []


# -- every record, every version --------------------------------------------------------------
@pytest.mark.parametrize("version", [800, 900, 1000, 1100, 1200])
def test_every_record_round_trips_in_every_version(version):
    m = read_mdx(write_mdx(everything(version)), f"v{version}.mdx")
    text = write_mdl(m)
    back = round_trip(m)
    assert back.version == version and back.diagnostics == []
    assert write_mdx(back) == write_mdx(m)  # canonical chunk order, identical bytes
    assert f"FormatVersion {version}" in text
    if version >= 1100:
        assert "static TextureID 0 <= 0," in text or "<= 0," in text
        assert "TextureID 0 <= 1 2 {" in text  # a slot with a KMTF track
    if 900 <= version <= 1000:
        assert 'Shader "Shader_HD_DefaultUnit"' in text
    if version >= 1200:
        assert "ShadowIntensity 0.5," in text


def test_track_order_and_static_values_next_to_tracks_survive():
    e = ParticleEmitter2(name="P", object_id=0, flags=0x1000, speed=3.0)
    e.tracks = {"KP2V": track("KP2V", [0], [1.0], 0), "KP2S": track("KP2S", [0, 10], [1.0, 2.0], 2)}
    m = Model(particle_emitters2=[e], pivots=np.zeros((1, 3), "<f4"))
    text = write_mdl(m)
    assert "static Speed 3," in text and text.index("Visibility 1 {") < text.index("Speed 2 {")
    back = round_trip(m)
    assert list(back.particle_emitters2[0].tracks) == ["KP2V", "KP2S"]


# -- flags --------------------------------------------------------------------------------------
def test_node_flags_use_words_and_fall_back_to_flags_n():
    plain = Bone(name="a", object_id=0, flags=0x100 | rules.NODE_FLAG_DONT_INHERIT_ROTATION | 0x8)
    odd = Helper(name="b", object_id=1, flags=0x100)  # a helper with the bone bit (Jack3.mdx has these)
    m = Model(bones=[plain], helpers=[odd], pivots=np.zeros((2, 3), "<f4"))
    text = write_mdl(m)
    assert "DontInherit { Rotation }," in text and "Billboarded," in text
    assert text.count("Flags ") == 1 and "Flags 256," in text
    round_trip(m)
    m2 = read_mdl('Bone "x" { ObjectId 0, DontInherit { Translation, Scaling }, CameraAnchored, }')
    assert m2.bones[0].flags == 0x100 | 0x1 | rules.NODE_FLAG_DONT_INHERIT_SCALING | 0x80


def test_geoset_animation_colour_flag_and_odd_flags():
    m = Model(geosets=[Geoset()], geoset_animations=[
        GeosetAnimation(flags=2),  # uses its (white) colour: written so that the flag comes back
        GeosetAnimation(flags=0x1A, color=(0.1, 0.2, 0.3)),  # SmileyGW_004.mdx has 26
        GeosetAnimation(flags=1, alpha=0.5)])
    text = write_mdl(m)
    assert "static Color { 1, 1, 1 }," in text and "Flags 26," in text and "DropShadow," in text
    round_trip(m)


def test_enum_values_without_a_word_and_squirt_values():
    e = ParticleEmitter2(name="p", flags=0x1000, filter_mode=9, head_or_tail=7, squirt=2)
    lamp = Light(name="l", object_id=1, flags=0x200, type=5)
    m = Model(particle_emitters2=[e], lights=[lamp])
    text = write_mdl(m)
    assert "FilterMode 9," in text and "HeadOrTail 7," in text and "Squirt 2," in text and "LightType 5," in text
    round_trip(m)


# -- layers and Reforged texture slots --------------------------------------------------------
def test_slot_syntax_reads_hivewe_style_and_a_slot_track():
    text = """Version { FormatVersion 1100 }
    Textures 2 { Bitmap { Image "a.dds" } Bitmap { Image "b.dds" } }
    Materials 1 { Material { Layer {
        FilterMode Blend,
        Shader "Shader_HD_DefaultUnit",
        static TextureID 0 <= 0,
        TextureID 1 <= 1 2 { DontInterp, 0: 1, 100: 0, }
    } } }"""
    m = read_mdl(text)
    layer = m.materials[0].layers[0]
    assert layer.shader_type_id == 1 and layer.filter_mode == 2 and layer.texture_id == 0
    assert [(s.texture_id, s.slot) for s in layer.textures] == [(0, 0), (1, 1)]
    t = layer.textures[1].texture_track
    assert t.tag == "KMTF" and t.frames.tolist() == [0, 100] and t.values.tolist() == [1, 0]
    assert "TextureID 1 <= 1 2 {" in write_mdl(m)
    round_trip(m)
    back = read_mdx(write_mdx(m))
    assert back.materials[0].layers[0].textures[1].texture_track.values.tolist() == [1, 0]


def test_v900_layer_fresnel_is_kept_per_layer():
    with_f = Layer(emissive_gain=0.5, fresnel_color=(0.1, 0.2, 0.3), has_fresnel=True)
    without = Layer()
    m = Model(version=900, textures=[Texture()], materials=[Material(layers=[with_f, without])])
    back = round_trip(m)
    assert [la.has_fresnel for la in back.materials[0].layers] == [True, False]
    again = read_mdx(write_mdx(back))
    assert again.materials[0].layers[0].fresnel_color == pytest.approx((0.1, 0.2, 0.3))
    assert same(again, m)


def test_shader_type_ids_other_than_hd():
    m = Model(version=1100, materials=[Material(layers=[Layer(shader_type_id=2, textures=[TextureSlot(0, 0)])])])
    assert "ShaderTypeId 2," in write_mdl(m)
    round_trip(m, check_indices=False)


# -- geometry -----------------------------------------------------------------------------------
def _geoset(**kw) -> Geoset:
    g = Geoset(vertices=np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], "<f4"),
               normals=np.array([[0, 0, 1]] * 3, "<f4"), uv_sets=[np.zeros((3, 2), "<f4")],
               vertex_groups=np.zeros(3, "u1"), matrix_group_sizes=np.array([1], "<u4"),
               matrix_indices=np.array([0], "<u4"))
    for k, v in kw.items():
        setattr(g, k, v)
    return g


def test_face_groups_of_several_primitive_types_and_the_explicit_forms():
    g = _geoset(face_types=np.array([4, 5, 99], "<u4"), face_counts=np.array([3, 3, 0], "<u4"),
                faces=np.array([0, 1, 2, 2, 1, 0], "<u2"))
    m = Model(geosets=[g], bones=[Bone(name="b", flags=0x100)], pivots=np.zeros((1, 3), "<f4"))
    text = write_mdl(m)
    assert "Faces 3 6 {" in text and "TriangleStrip {" in text and "Primitive99 {" in text
    round_trip(m)
    # Counts that do not add up (a broken MDX loaded without index checks) are kept exactly.
    bad = _geoset(face_types=np.array([4], "<u4"), face_counts=np.array([6], "<u4"),
                  faces=np.array([0, 1, 2], "<u2"), matrix_group_sizes=np.array([2], "<u4"))
    m = Model(geosets=[bad], bones=[Bone(name="b", flags=0x100)], pivots=np.zeros((1, 3), "<f4"))
    text = write_mdl(m)
    assert "Types { 4 }," in text and "Sizes { 2 }," in text
    with pytest.raises(FormatError, match="face groups add up|matrix group sizes"):
        read_mdl(text)
    round_trip(m, check_indices=False)


def test_skin_weights_rows_counts_and_uncounted():
    a = read_mdl("Geoset { SkinWeights { 1, 2, 3, 4, 255, 0, 0, 0, } }", check_indices=False)
    b = read_mdl("Geoset { SkinWeights 1 { 1, 2, 3, 4, 255, 0, 0, 0, } }", check_indices=False)
    c = read_mdl("Geoset { SkinWeights 1 { { 1, 2, 3, 4, 255, 0, 0, 0 }, } }", check_indices=False)
    for m in (a, b, c):
        assert m.geosets[0].skin.tolist() == [[1, 2, 3, 4, 255, 0, 0, 0]]


# -- what MDL cannot say, and odd input that still loads ---------------------------------------
def test_unknown_chunks_are_left_out_with_a_diagnostic():
    m = Model(unknown_chunks=[UnknownChunk("XYZW", b"1234")])
    text = write_mdl(m)
    assert "unknown chunk 'XYZW'" in text
    assert any("XYZW" in d.message for d in m.diagnostics)
    write_mdl(m)
    assert sum("XYZW" in d.message for d in m.diagnostics) == 1  # not repeated per write


def test_static_visibility_becomes_a_constant_track():
    m = read_mdl('Attachment "a" { ObjectId 0, static Visibility 0, }')
    t = m.attachments[0].tracks["KATV"]
    assert t.interpolation == 0 and t.values.tolist() == [0.0]
    assert any("Visibility" in d.message for d in m.diagnostics)
    with pytest.raises(FormatError, match="strict mode"):
        read_mdl('Attachment "a" { ObjectId 0, static Visibility 0, }', strict=True)


def test_missing_object_ids_are_assigned_in_node_order():
    m = read_mdl('Bone "a" { } Helper "b" { Parent 0, } Bone "c" { ObjectId 5 }')
    assert [(n.name, n.object_id) for n in m.nodes()] == [("a", 0), ("c", 5), ("b", 2)]
    assert sum("no ObjectId" in d.message for d in m.diagnostics) == 2


def test_colours_keep_the_mdx_component_order():
    ga = GeosetAnimation(color=(0.1, 0.2, 0.3), flags=2)
    ga.tracks = {"KGAC": track("KGAC", [0], [[0.4, 0.5, 0.6]])}
    text = write_mdl(Model(geosets=[Geoset()], geoset_animations=[ga]))
    assert "static Color { 0.1, 0.2, 0.3 }," in text and "0: { 0.4, 0.5, 0.6 }," in text


def test_non_utf8_names_survive_mdl_files(tmp_path):
    raw = "Bone \xe9t\xe9".encode("latin-1").decode("utf-8", "surrogateescape")
    m = Model(bones=[Bone(name=raw, flags=0x100)], pivots=np.zeros((1, 3), "<f4"))
    path = tmp_path / "latin.mdl"
    save_mdl(m, path)
    assert b"Bone \xe9t\xe9" in path.read_bytes()
    back = load_model(path)
    assert back.bones[0].name == raw
    assert b"Bone \xe9t\xe9\0" in write_mdx(back)


def test_the_format_registry_reads_and_writes_mdl(tmp_path):
    m = read_mdx(write_mdx(everything(1000)))
    save_model(m, tmp_path / "x.mdl")
    back = load_model(tmp_path / "x.mdl", strict=True, check_indices=False)
    assert same(back, m) and back.format == "mdl"
