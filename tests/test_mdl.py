"""MDL text on the corpus: MDX -> MDL -> model/MDX round trips, real MDL files, and MDL/MDX pairs."""

from __future__ import annotations

import dataclasses
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from mdx_cases import REJECTED

from renderer.errors import FormatError
from renderer.formats import load_model
from renderer.formats.mdl import read_mdl, write_mdl
from renderer.formats.mdx import read_mdx, write_mdx
from renderer.model import same

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
MDX_FILES = sorted(CORPUS.rglob("*.mdx")) + sorted(CORPUS.rglob("*.MDX")) if CORPUS.is_dir() else []
MDL_FILES = sorted(CORPUS.rglob("*.mdl")) if CORPUS.is_dir() else []
ALL_MDX = "zengfanfan__war3mdlx/test/all.mdx"  # loads only without index checks
ROUND_TRIP = [p for p in MDX_FILES if str(p.relative_to(CORPUS)) not in REJECTED or
              str(p.relative_to(CORPUS)) == ALL_MDX]
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not present")
F32 = struct.Struct("<f")


def rel(p: Path) -> str:
    return str(p.relative_to(CORPUS))


def corpus(relpath: str) -> Path:
    p = CORPUS / relpath
    if not p.exists():
        pytest.skip(f"corpus file {relpath} is not present")
    return p


def bit_diff(a, b, path: str = "model") -> str | None:
    """Where two models differ, like `same` but with every float compared bit for bit (float32)."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        if type(a) is not type(b):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        for f in dataclasses.fields(a):
            if not f.metadata.get("detail"):
                r = bit_diff(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
                if r:
                    return r
        return None
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.shape != b.shape:
            return f"{path}: array shapes"
        if a.dtype.names or b.dtype.names:
            return None if a.dtype == b.dtype and a.tobytes() == b.tobytes() else f"{path}: keys differ"
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            same_bits = np.ascontiguousarray(a, "<f4").tobytes() == np.ascontiguousarray(b, "<f4").tobytes()
            return None if same_bits else f"{path}: float bits differ"
        return None if np.array_equal(a, b) else f"{path}: values differ"
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            r = bit_diff(x, y, f"{path}[{i}]")
            if r:
                return r
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} vs {list(b)}"
        for k in a:
            r = bit_diff(a[k], b[k], f"{path}[{k}]")
            if r:
                return r
        return None
    if isinstance(a, float) or isinstance(b, float):
        return None if F32.pack(a) == F32.pack(b) else f"{path}: {a!r} vs {b!r}"
    return None if a == b else f"{path}: {a!r} vs {b!r}"


# -- MDX -> MDL -> model / MDX ----------------------------------------------------------------
@needs_corpus
def test_the_corpus_has_the_models_the_round_trips_need():
    assert len(ROUND_TRIP) >= 30  # 29 that read_mdx accepts, plus all.mdx without index checks


@pytest.mark.parametrize("path", ROUND_TRIP, ids=[rel(p) for p in ROUND_TRIP])
def test_mdx_to_mdl_to_model_is_the_same_model_bit_for_bit(path):
    check = rel(path) != ALL_MDX
    model = read_mdx(path.read_bytes(), str(path), check_indices=check)
    text = write_mdl(model)
    back = read_mdl(text, str(path) + ".mdl", check_indices=check)
    assert same(model, back)
    assert bit_diff(model, back) is None
    assert back.version == model.version
    assert len(back.diagnostics) == len(model.diagnostics)  # none, or all.mdx's index problems again
    # ... and the MDX written from the MDL model reads back as the same model.
    again = read_mdx(write_mdx(back), "again.mdx", check_indices=check)
    assert same(model, again)
    assert bit_diff(model, again) is None
    # MDL text -> model -> MDL text is a fixed point.
    assert write_mdl(back) == text


@needs_corpus
def test_mdx_written_from_mdl_keeps_the_bytes_when_the_chunk_order_is_canonical():
    path = corpus("zengfanfan__war3mdlx/test/cube.mdx")
    data = path.read_bytes()
    assert write_mdx(read_mdl(write_mdl(read_mdx(data)))) == data


# -- real MDL files ---------------------------------------------------------------------------
@pytest.mark.parametrize("path", MDL_FILES, ids=[rel(p) for p in MDL_FILES])
def test_every_corpus_mdl_file_parses(path):
    model = load_model(path, check_indices=False)
    assert model.format == "mdl"
    # What we read, we write and read back unchanged.
    assert same(read_mdl(write_mdl(model), check_indices=False), model)


@needs_corpus
def test_hivewe_minimal_v800():
    m = load_model(corpus("stijnherfst__HiveWE/tests/fixtures/mdl/minimal_v800.mdl"))
    assert m.version == 800 and m.name == "minimal_v800" and m.blend_time == 150
    assert m.extent.max == (10.0, 10.0, 20.0) and m.global_sequences == [2000]
    assert m.sequences[0].interval == (0, 1000) and m.sequences[0].move_speed == 100.0
    assert m.textures[0].flags == 3 and m.textures[0].path == "Textures/Stone.blp"
    top, add = m.materials[0].layers
    assert (top.filter_mode, top.shading_flags, top.texture_animation_id) == (2, 0x1 | 0x10, 0)
    assert add.filter_mode == 3 and add.shading_flags == 0x20
    alpha = add.tracks["KMTA"]
    assert alpha.global_sequence_id == 0 and alpha.interpolation_name == "Linear"
    assert alpha.frames.tolist() == [0, 1000] and alpha.values.tolist() == [1.0, 0.0]
    g = m.geosets[0]
    assert g.vertices.shape == (3, 3) and g.faces.tolist() == [0, 1, 2] and g.face_types.tolist() == [4]
    assert g.sequence_extents[0].radius == pytest.approx(14.142)
    ga = m.geoset_animations[0]
    assert ga.color == pytest.approx((1.0, 0.5, 0.25)) and ga.flags == 2 and list(ga.tracks) == ["KGAO"]
    assert len(m.nodes()) == 12 and len(m.pivots) == 12
    assert m.bones[0].node_tracks["KGTR"].values.tolist() == [[0, 0, 0], [0, 0, 5]]
    assert m.bones[0].flags == 0x100 and m.helpers[0].parent_id == 0
    light = m.lights[0]
    assert (light.type, light.attenuation_start, light.intensity, light.ambient_color) == (
        0, 80.0, 5.0, pytest.approx((0.2, 0.2, 0.2)))
    att = m.attachments[0]
    assert att.path == "Splat\\Attach.mdl" and att.tracks["KATV"].interpolation == 0
    prem = m.particle_emitters[0]
    assert prem.flags == 0x1000 | 0x8000 and prem.speed == 100.0 and prem.path == "Models\\Dummy.mdl"
    pre2 = m.particle_emitters2[0]
    assert (pre2.filter_mode, pre2.squirt, pre2.head_or_tail, pre2.lifespan) == (1, 1, 0, 1.5)
    assert (pre2.length, pre2.width) == (5.0, 5.0) and pre2.segment_alphas == (255, 200, 0)
    assert pre2.segment_colors[1] == (0.5, 0.5, 0.5) and pre2.segment_scaling == (1.0, 2.0, 3.0)
    ribbon = m.ribbon_emitters[0]
    assert ribbon.color == (1.0, 0.0, 0.0) and ribbon.emission_rate == 30 and ribbon.lifespan == 2.0
    ev = m.event_objects[0]
    assert ev.name == "SNDxFOO0" and ev.frames.tolist() == [500] and ev.flags == 0x400
    shapes = {s.name: s for s in m.collision_shapes}
    assert shapes["BoxCollision"].type == 0 and shapes["BoxCollision"].vertices[1] == (5.0, 5.0, 10.0)
    assert shapes["SphereCollision"].type == 2 and shapes["SphereCollision"].radius == 5.0
    assert len(shapes["SphereCollision"].vertices) == 1
    assert shapes["CylinderCollision"].type == 3 and shapes["CylinderCollision"].radius == 3.0
    cam = m.cameras[0]
    assert cam.position == (0.0, -50.0, 20.0) and cam.target == (0.0, 0.0, 10.0) and cam.far_clip == 5000.0
    assert m.diagnostics == []


@needs_corpus
def test_hivewe_reforged_fixtures():
    m900 = load_model(corpus("stijnherfst__HiveWE/tests/fixtures/mdl/minimal_v900.mdl"))
    mat = m900.materials[0]
    # HiveWE folds the six HD textures into one layer with slots; 900 stores one layer per slot.
    assert mat.shader == "Shader_HD_DefaultUnit" and len(mat.layers) == 6
    assert [la.texture_id for la in mat.layers] == [0, 1, 2, 3, 4, 5]
    assert all(la.filter_mode == 1 and la.textures == [] for la in mat.layers)
    g = m900.geosets[0]
    assert g.tangents.shape == (3, 4) and g.skin.shape == (3, 8) and g.skin[0].tolist() == [0, 0, 0, 0, 255, 0, 0, 0]
    assert g.lod_name == "TriangleHD" and m900.bind_pose.shape == (2, 12) and m900.bind_pose[1, 11] == 5.0
    m1000 = load_model(corpus("stijnherfst__HiveWE/tests/fixtures/mdl/minimal_v1000.mdl"))
    layer = m1000.materials[0].layers[0]
    assert layer.emissive_gain == 0.75 and layer.fresnel_opacity == pytest.approx(0.4)
    assert layer.fresnel_team_color == pytest.approx(0.2) and layer.tracks["KFC3"].values.tolist()[1] == [0, 0.5, 1]
    assert m1000.bones[0].geoset_id == 0 and m1000.bones[0].geoset_animation_id == -1
    m1100 = load_model(corpus("stijnherfst__HiveWE/tests/fixtures/mdl/minimal_v1100.mdl"))
    layer = m1100.materials[0].layers[0]
    assert layer.shader_type_id == 1 and [(s.texture_id, s.slot) for s in layer.textures] == [(i, i) for i in range(6)]
    assert m1100.textures[4].replaceable_id == 1 and m1100.geosets[0].skin.shape == (3, 8)
    assert m1100.geosets[0].vertex_groups.size == 0 and m1100.bind_pose.shape == (1, 12)
    skin = load_model(corpus("stijnherfst__HiveWE/tests/fixtures/mdl/skin_v900.mdl"))
    assert skin.geosets[0].skin[:, 0].tolist() == [5, 1, 0] and skin.geosets[0].skin[2, 4] == 200
    emitter = load_model(corpus("stijnherfst__HiveWE/tests/fixtures/mdl/emitter2_v800.mdl"))
    e = emitter.particle_emitters2[0]
    assert (e.rows, e.columns, e.time, e.replaceable_id, e.speed) == (0, 1, 2.0, 99, 1.0)


@needs_corpus
def test_hivewe_matrix_skinning_fixture_names_a_missing_node():
    path = corpus("stijnherfst__HiveWE/tests/fixtures/mdl/matrix_skinning_v800.mdl")
    with pytest.raises(FormatError) as info:
        load_model(path)
    assert "Groups names node 9" in info.value.problem and "line 27" in info.value.where
    m = load_model(path, check_indices=False)
    assert m.geosets[0].matrix_indices.tolist() == [9, 1]
    assert any("node 9" in d.message for d in m.diagnostics)


@needs_corpus
def test_wc3lib_bones_and_lights():
    bones = load_model(corpus("tdauth__wc3lib/src/mdlx/test/mdl/bones.mdl"))
    assert [b.name for b in bones.bones] == ["grass213", "clouds good!"]
    rot = bones.bones[0].node_tracks["KGRT"]
    assert rot.interpolation_name == "Hermite" and rot.global_sequence_id == 7 and len(rot.keys) == 16
    assert rot.keys["in_tan"][1].tolist() == pytest.approx([0.024497, -0.008966, 0.002622, 0.999656])
    assert bones.bones[0].geoset_id == 20 and bones.bones[1].geoset_id == -1
    assert any("no Version block" in d.message for d in bones.diagnostics)
    lights = load_model(corpus("tdauth__wc3lib/src/mdlx/test/mdl/lights.mdl"))
    assert [x.object_id for x in lights.lights] == [149, 150, 151, 152]
    assert lights.lights[1].color == pytest.approx((0.972549, 0.937255, 0.878431))
    assert lights.lights[3].parent_id == 151 and lights.lights[3].intensity == 35.0
    assert lights.lights[2].tracks["KLAV"].frames.tolist() == [70500, 82833, 87333]
    assert lights.lights[2].node_tracks["KGTR"].values[2].tolist() == pytest.approx([1809.13, -103.703, 0])


@needs_corpus
def test_retera_packhorse_and_human():
    horse = load_model(corpus("Retera__ReterasModelStudio/MDXLib/PackHorse.mdl"))
    assert [len(g.vertices) for g in horse.geosets] == [200, 74, 84]
    assert [len(g.faces) for g in horse.geosets] == [483, 204, 288]
    assert len(horse.sequences) == 14 and [b.name for b in horse.bones] == ["sucky test"]
    assert horse.geosets[0].matrix_group_sizes.tolist() == [1, 2, 3, 4]
    # "3.402820018375656e+038" (exponent with three digits) is FLT_MAX.
    assert horse.geosets[0].sequence_extents[13].min[1] == pytest.approx(3.4028200e38)
    human = load_model(corpus("Retera__ReterasModelStudio/HayatesCharacterEngine/mesh/characters/human.mdl"))
    assert [len(g.vertices) for g in human.geosets] == [390, 40]
    assert (len(human.bones), len(human.helpers), len(human.attachments)) == (25, 15, 9)
    assert (len(human.event_objects), len(human.collision_shapes), len(human.pivots)) == (6, 2, 57)
    assert len(human.sequences) == 13 and len(human.geoset_animations) == 2
    assert all(s.type == 2 for s in human.collision_shapes)


@needs_corpus
def test_war3mdlx_files_and_their_quirks():
    allm = load_model(corpus("zengfanfan__war3mdlx/test/all.mdl"), check_indices=False)
    assert [len(g.vertices) for g in allm.geosets] == [1, 14]
    child = allm.bones[1]
    assert child.flags == 0x100 | 0xFF  # every DontInherit, billboard and CameraAnchored word
    assert allm.sequences[0].flags == 1 and allm.sequences[0].rarity == pytest.approx(1.23)
    tv = allm.texture_animations[0].tracks
    assert list(tv) == ["KTAT", "KTAR", "KTAS"] and tv["KTAR"].global_sequence_id == -11
    assert allm.particle_emitters[1].flags == 0x1000 | 0x8000 | 0x10000
    cube = load_model(corpus("zengfanfan__war3mdlx/test/cube.mdl"))
    assert len(cube.textures) == 5  # the file says "Textures 4" but lists five
    assert any("Textures declares 4 entries but holds 5" in d.message for d in cube.diagnostics)
    assert cube.ribbon_emitters[0].tracks["KRTX"].values.tolist() == [11, 22]
    ribbon = load_model(corpus("zengfanfan__war3mdlx/test/!RibbonEmitter.mdl"))
    assert len(ribbon.bones[0].node_tracks["KGTR"].keys) == 3  # declared as 2
    assert any("declares 2 keys but holds 3" in d.message for d in ribbon.diagnostics)
    assert ribbon.textures[0].replaceable_id == 2


# -- MDL files next to their MDX: what real MDL tools write --------------------------------------
def _pair(name: str, check: bool = True):
    mdx = load_model(corpus(f"zengfanfan__war3mdlx/test/{name}.mdx"), check_indices=check)
    mdl = load_model(corpus(f"zengfanfan__war3mdlx/test/{name}.mdl"), check_indices=check)
    return mdx, mdl


@needs_corpus
def test_pair_all_agrees_on_content_and_pins_the_colour_and_pre2_findings():
    mdx, mdl = _pair("all", check=False)
    for a, b in zip(mdx.geosets, mdl.geosets, strict=True):
        for attr in ("vertices", "normals", "faces", "face_types", "face_counts", "vertex_groups",
                     "matrix_group_sizes", "matrix_indices"):
            assert np.array_equal(getattr(a, attr), getattr(b, attr)), attr
        assert np.allclose(a.uv_sets[0], b.uv_sets[0])
        assert (a.material_id, a.selection_group, a.selection_flags) == (b.material_id, b.selection_group,
                                                                        b.selection_flags)
    assert [(n.name, n.object_id, n.parent_id, n.flags) for n in mdx.nodes()] == [
        (n.name, n.object_id, n.parent_id, n.flags) for n in mdl.nodes()]
    assert np.allclose(mdx.pivots, mdl.pivots)
    for a, b in zip(mdx.materials, mdl.materials, strict=True):
        assert (a.priority_plane, a.flags) == (b.priority_plane, b.flags)
        for la, lb in zip(a.layers, b.layers, strict=True):
            assert (la.filter_mode, la.shading_flags, la.texture_id, la.texture_animation_id, la.coord_id) == (
                lb.filter_mode, lb.shading_flags, lb.texture_id, lb.texture_animation_id, lb.coord_id)
            assert la.alpha == pytest.approx(lb.alpha) and set(la.tracks) == set(lb.tracks)
    # PRE2: MDL "Length" is the field at N+24 (track KP2N), "Width" the one at N+28 (KP2W).
    pa, pb = mdx.particle_emitters2[1], mdl.particle_emitters2[1]
    assert (pa.length, pa.width) == (pb.length, pb.width) == (6.0, 5.0)
    ka, kb = mdx.particle_emitters2[2].tracks, mdl.particle_emitters2[2].tracks
    assert ka["KP2N"].frames.tolist() == kb["KP2N"].frames.tolist() == [7123, 7456]  # "Length 2 { 7123: ... }"
    assert ka["KP2W"].frames.tolist() == kb["KP2W"].frames.tolist() == [6123, 6456]
    # Static colours: the MDL text and the MDX bytes have the same component order ...
    assert mdx.geoset_animations[0].color == mdl.geoset_animations[0].color
    assert mdx.lights[0].color == mdl.lights[0].color == pytest.approx((0.1, 0.2, 1.3))
    assert mdx.ribbon_emitters[1].color == mdl.ribbon_emitters[1].color
    assert mdx.particle_emitters2[1].segment_colors == mdl.particle_emitters2[1].segment_colors
    # ... but war3mdlx reverses colour *tracks* (KGAC, KLAC, KLBC, KRCO) between MDL and MDX.
    for a, b in ((mdx.geoset_animations[1].tracks["KGAC"], mdl.geoset_animations[1].tracks["KGAC"]),
                 (mdx.lights[1].tracks["KLAC"], mdl.lights[1].tracks["KLAC"]),
                 (mdx.ribbon_emitters[2].tracks["KRCO"], mdl.ribbon_emitters[2].tracks["KRCO"])):
        assert np.allclose(a.values, b.values[:, ::-1])
        assert not np.allclose(a.values, b.values)


@needs_corpus
def test_pairs_cube_and_ribbon_colour_order():
    # cube.mdx was written by another converter (its RIBB flags are 0x400000, the "[ToolA]" bug that
    # all.mdl describes): that tool reversed the static ribbon colour.
    mdx, mdl = _pair("cube")
    assert mdx.ribbon_emitters[0].flags == 0x400000 and mdl.ribbon_emitters[0].flags == 0x4000
    assert mdx.ribbon_emitters[0].color == pytest.approx(mdl.ribbon_emitters[0].color[::-1])
    assert np.array_equal(mdx.geosets[0].vertices, mdl.geosets[0].vertices)
    assert np.allclose(mdx.geosets[0].normals, mdl.geosets[0].normals, atol=1e-6)
    # !RibbonEmitter: the colour track { 0, 0, 1 } is in the same order in both files.
    mdx, mdl = _pair("!RibbonEmitter")
    a, b = mdx.ribbon_emitters[0].tracks["KRCO"], mdl.ribbon_emitters[0].tracks["KRCO"]
    assert a.values.tolist() == b.values.tolist() == [[0.0, 0.0, 1.0]]
    assert np.array_equal(mdx.geosets[0].faces, mdl.geosets[0].faces)


@needs_corpus
def test_pair_packhorse_geometry_matches_within_the_text_precision():
    mdx = load_model(corpus("Retera__ReterasModelStudio/MDXLib/PackHorse.mdx"))
    mdl = load_model(corpus("Retera__ReterasModelStudio/MDXLib/PackHorse.mdl"))
    # The MDL is a later edit (one bone, re-ordered textures), but the meshes are the same.
    for a, b in zip(mdx.geosets, mdl.geosets, strict=True):
        assert np.allclose(a.vertices, b.vertices, rtol=1e-6, atol=1e-5)
        assert np.allclose(a.normals, b.normals, rtol=1e-6, atol=1e-6)
        assert np.allclose(a.uv_sets[0], b.uv_sets[0], rtol=1e-6, atol=1e-6)
        assert np.array_equal(a.faces, b.faces)
    # Its per-sequence geoset extents are the 7 MDX floats (radius, min, max) relabelled as
    # (min, max, radius): the toolkit that wrote it read the extent in the wrong order.
    e_mdx, e_mdl = mdx.geosets[0].sequence_extents[0], mdl.geosets[0].sequence_extents[0]
    flat_mdx = [e_mdx.radius, *e_mdx.min, *e_mdx.max]
    flat_mdl = [*e_mdl.min, *e_mdl.max, e_mdl.radius]
    assert flat_mdx == pytest.approx(flat_mdl)


# -- speed -------------------------------------------------------------------------------------
@needs_corpus
@pytest.mark.parametrize("name", ["VillagersReReforged/Girl2.mdx", "HarvestGolem/HarvestGolem.mdx"])
def test_large_models_convert_in_well_under_a_second(name):
    path = corpus(f"pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/{name}")
    model = read_mdx(path.read_bytes())
    t0 = time.perf_counter()
    text = write_mdl(model)
    t1 = time.perf_counter()
    read_mdl(text)
    t2 = time.perf_counter()
    # Typically ~0.1 s and ~0.2 s; generous bounds so a loaded CI machine does not flake.
    assert t1 - t0 < 2.0 and t2 - t1 < 2.0, (t1 - t0, t2 - t1)
