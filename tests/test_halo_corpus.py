"""Every Halo model tag in the corpus loads, with facts read off the files; geometry checks on real data."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import CORPUS, corpus_files

from renderer.assets.search import AssetSearch
from renderer.errors import FormatError
from renderer.formats import load, load_model
from renderer.formats.halo import format_halo_info, read_model_tag
from renderer.formats.halo import geometry as G
from renderer.model import Model

pytestmark = pytest.mark.corpus

MONACO = "aLTis94__Halo-CE-Monaco/tags"
HALO = "halo/aLTis94__Halo-CE-Monaco/tags"
CYBORG = f"{MONACO}/characters/cyborg/cyborg.gbxmodel"
TREE = f"{MONACO}/scenery/trees/tree_leafy/tree_leafy.gbxmodel"
MARINE = f"{MONACO}/characters/marine/marine.gbxmodel"
PALM = f"{HALO}/scenery/palm/palm.gbxmodel"
CYBORG_FP = f"{HALO}/characters/cyborg/fp/fp.gbxmodel"
PLASMA_FP = f"{HALO}/weapons/plasma_cannon/fp/fp.gbxmodel"
DEBRIS = f"{HALO}/effects/debris objects/forerunner dark structure/forerunner dark structure.gbxmodel"
B30 = f"{HALO}/levels/b30/devices/interior tech objects"

# path, class, nodes, permutations per region, geometries, parts, shaders, uncompressed vertices (all geometries)
FACTS = [
    (CYBORG, "mod2", 19, (1,), 5, 17, 4, 6025),
    (MARINE, "mod2", 20, (3, 12, 1, 1), 85, 155, 21, 15193),
    (f"{MONACO}/powerups/over shield/over shield.gbxmodel", "mod2", 1, (1,), 1, 3, 3, 817),
    (f"{MONACO}/scenery/halo/halo.gbxmodel", "mod2", 1, (1,), 1, 3, 3, 1330),
    (f"{MONACO}/scenery/teleporter_shield/teleporter_shield.gbxmodel", "mod2", 1, (1,), 1, 1, 1, 10),
    (TREE, "mod2", 4, (1, 1), 2, 2, 2, 460),
    (f"{MONACO}/sky/sky_ui/sky_ui.gbxmodel", "mod2", 1, (1, 1, 1, 1), 4, 4, 4, 207),
    (f"{MONACO}/vehicles/banshee/banshee.gbxmodel", "mod2", 4, (2,), 8, 12, 3, 4815),
    (f"{MONACO}/vehicles/f1_test/f1_test.gbxmodel", "mod2", 6, (1,), 1, 10, 10, 28740),
    (f"{MONACO}/weapons/assault rifle/assault rifle.gbxmodel", "mod2", 3, (1,), 3, 10, 9, 1075),
    (f"{HALO}/characters/cyborg/cyborg.gbxmodel", "mod2", 19, (1,), 5, 17, 4, 6025),
    (CYBORG_FP, "mod2", 37, (1,), 1, 4, 2, 1495),
    (DEBRIS, "mod2", 1, (2,), 2, 2, 1, 114),
    (f"{B30}/control door/control door.model", "mode", 4, (1,), 1, 3, 3, 25),
    (f"{B30}/holo beam tube/holo beam tube.model", "mode", 1, (1,), 1, 1, 1, 26),
    (f"{B30}/holo control equipment/holo control equipment.model", "mode", 5, (1,), 1, 2, 2, 23),
    (f"{B30}/holo control room display/holo control room display.model", "mode", 21, (1,), 1, 3, 3, 5732),
    (f"{B30}/holo control/holo control.gbxmodel", "mod2", 1, (1,), 1, 1, 1, 74),
    (f"{B30}/holo control/holo control.model", "mode", 1, (1,), 1, 1, 1, 74),
    (f"{B30}/holo display tall/holo display tall.model", "mode", 1, (1,), 1, 1, 1, 10),
    (PALM, "mod2", 1, (1,), 1, 2, 2, 557),
    (f"{HALO}/scenery/rocks/boulder/boulder.gbxmodel", "mod2", 1, (1,), 1, 1, 1, 20),
    (PLASMA_FP, "mod2", 41, (2,), 2, 10, 5, 2127),
]

ALL_TAGS = corpus_files("*.gbxmodel", "*.model")


def rel(p) -> str:
    return str(p.relative_to(CORPUS)).replace("\\", "/")


def path_of(r: str):
    p = CORPUS / r
    if not p.exists():
        pytest.skip(f"corpus file {r} is not present")
    return p


def test_facts_cover_every_corpus_tag():
    if not ALL_TAGS:
        pytest.skip("no Halo tags in the corpus")
    assert sorted(rel(p) for p in ALL_TAGS) == sorted(f[0] for f in FACTS)


@pytest.mark.parametrize("fact", FACTS, ids=[f[0].rsplit("/", 1)[-1] for f in FACTS])
def test_corpus_tag_loads_with_its_facts(fact):
    r, cls, nodes, perms, geometries, parts, shaders, vertices = fact
    p = path_of(r)
    data = p.read_bytes()
    tag = read_model_tag(data, str(p))
    assert tag.end == len(data)  # every block read, to exactly the end of the file
    m = load_model(p)
    assert isinstance(m, Model) and m.format == "halo" and m.name == p.stem
    assert m.version == (4 if cls == "mode" else 5)
    info = m.info
    assert info["class"] == cls and info["engine"] == "blam"
    assert len(m.bones) == len(info["nodes"]) == nodes
    assert tuple(len(r["permutations"]) for r in info["regions"]) == perms
    assert len(info["geometries"]) == geometries
    assert sum(len(g["parts"]) for g in info["geometries"]) == parts
    assert len(info["shaders"]) == shaders == len(tag.shaders)
    assert sum(p["uncompressed_vertices"] for g in info["geometries"] for p in g["parts"]) == vertices
    assert len(m.materials) >= shaders
    json.dumps(info)  # JSON-ready for `farm inspect --json`
    assert format_halo_info(info, m.diagnostics)
    # Geosets: consistent arrays, indices in range, weights normalised.
    assert m.geosets
    for gs in m.geosets:
        n = len(gs.vertices)
        assert gs.vertices.shape == (n, 3) and gs.normals.shape == (n, 3) and gs.uv_sets[0].shape == (n, 2)
        assert gs.tangents.shape == (n, 4)
        assert gs.faces.dtype == np.uint16 and len(gs.faces) % 3 == 0 and len(gs.faces) > 0
        assert gs.faces.max() < n
        assert 0 <= gs.material_id < len(m.materials)
        assert gs.bone_indices.shape == (n, 4) and gs.bone_weights.shape == (n, 4)
        assert gs.bone_indices.min() >= 0 and gs.bone_indices.max() < nodes
        assert np.allclose(gs.bone_weights.sum(axis=1), 1, atol=1e-5)
        assert np.isfinite(gs.vertices).all()
    for mat in m.materials:
        assert 0 <= mat.layers[0].texture_id < len(m.textures)


def test_header_checksums():
    assert load_model(path_of(CYBORG)).info["checksum_ok"] is True
    palm = load_model(path_of(PALM))  # zeroed header: no checksum stored, not a mismatch
    assert palm.info["checksum_ok"] is None
    assert not any("checksum" in d.message for d in palm.diagnostics)


def test_checksum_mismatch_is_a_diagnostic(tmp_path):
    data = bytearray(path_of(CYBORG).read_bytes())
    data[0x28] ^= 0xFF
    bad = tmp_path / "cyborg.gbxmodel"
    bad.write_bytes(bytes(data))
    m = load_model(bad)
    assert m.info["checksum_ok"] is False
    assert any(d.where == "tag header" and d.offset == 0x28 and "checksum" in d.message for d in m.diagnostics)
    with pytest.raises(FormatError, match="strict"):
        load_model(bad, strict=True)


def _tag_parts():
    for p in ALL_TAGS:
        tag = read_model_tag(p.read_bytes(), str(p))
        for g in tag.geometries:
            for part in g.parts:
                yield p, tag, part


def test_faces_point_outward_on_the_corpus():
    """The face normal from the loader's winding agrees with the vertex normals (halo-tags.md §3)."""
    if not ALL_TAGS:
        pytest.skip("no Halo tags in the corpus")
    agree = total = 0
    per_tag: dict[str, list[int]] = {}
    for p, _tag, part in _tag_parts():
        v = G.decode_uncompressed(part.uncompressed) if len(part.uncompressed) else G.decode_compressed(part.compressed)
        tris, _ = G.strip_to_triangles(part.strip)
        if not len(tris):
            continue
        pos, nrm = v["position"].astype(np.float64), v["normal"].astype(np.float64)
        face = np.cross(pos[tris[:, 1]] - pos[tris[:, 0]], pos[tris[:, 2]] - pos[tris[:, 0]])
        ok = np.linalg.norm(face, axis=1) > 0
        dots = np.einsum("ij,ij->i", face, nrm[tris].sum(axis=1))[ok]
        a, t = int((dots > 0).sum()), int(ok.sum())
        agree, total = agree + a, total + t
        s = per_tag.setdefault(p.name, [0, 0])
        s[0] += a
        s[1] += t
    assert total > 60000
    assert agree / total > 0.99
    for name, (a, t) in per_tag.items():
        assert a / t > 0.95, name


def test_compressed_and_uncompressed_vertices_agree():
    """Parts carrying both forms agree within the compression error (halo-tags.md §2)."""
    if not ALL_TAGS:
        pytest.skip("no Halo tags in the corpus")
    checked = 0
    for _p, tag, part in _tag_parts():
        if not (len(part.uncompressed) and len(part.compressed)):
            continue
        assert len(part.uncompressed) == len(part.compressed)
        u, c = G.decode_uncompressed(part.uncompressed), G.decode_compressed(part.compressed)
        assert np.array_equal(u["position"], c["position"])
        for key in ("normal", "binormal", "tangent"):
            assert np.abs(u[key] - c[key]).max() <= 1 / 511 + 1e-6, key
        unit = np.abs(u["uv"]).max(axis=1) <= 1
        if unit.any():
            assert np.abs(u["uv"][unit] - c["uv"][unit]).max() <= 1.5 / 32767
        assert np.abs(u["weights"][:, 0] - c["weights"][:, 0]).max() <= 1.5 / 32767
        nodes = u["nodes"].copy()
        if part.local_nodes is not None and tag.flags & 2:
            ok = nodes >= 0
            nodes[ok] = part.local_nodes[nodes[ok]]
        assert np.array_equal(nodes, c["nodes"])
        checked += len(part.compressed)
    assert checked > 60000


def test_default_pose_puts_vertices_near_their_nodes():
    """Vertices sit in model space in the default pose; pivots are the nodes' default-pose origins.

    Under the conjugate convention biped vertices lie much nearer their own node than under the
    textbook one (halo-tags.md §4.1)."""
    m = load_model(path_of(CYBORG))
    t = np.array([n["translation"] for n in m.info["nodes"]])
    q = np.array([n["rotation"] for n in m.info["nodes"]])
    parents = [n["parent"] for n in m.info["nodes"]]
    world = np.array([n["world"] for n in m.info["nodes"]])
    assert np.allclose(world[:, :3, 3], m.pivots, atol=1e-6)
    local_textbook = G.local_matrices(t, q)
    local_textbook[:, :3, :3] = np.transpose(local_textbook[:, :3, :3], (0, 2, 1))
    textbook, _ = G.world_matrices(local_textbook, list(parents))
    near = np.concatenate([np.linalg.norm(g.vertices - m.pivots[g.bone_indices[:, 0]], axis=1) for g in m.geosets])
    far = np.concatenate([np.linalg.norm(g.vertices - textbook[g.bone_indices[:, 0], :3, 3], axis=1)
                          for g in m.geosets])
    assert near.mean() < 0.1 < 0.2 < far.mean()
    assert [b.parent_id for b in m.bones] == parents and parents[0] == -1
    assert m.bones[0].name == "bip01 pelvis"


def test_local_nodes_map_to_global_nodes():
    """Uncompressed node indices go through the part's local node table; compressed ones are global."""
    compared = 0
    for r, n_nodes in ((CYBORG_FP, 37), (PLASMA_FP, 41)):
        p = path_of(r)
        m = load_model(p)
        tag = read_model_tag(p.read_bytes(), str(p))
        assert "parts have local nodes" in m.info["flags"]
        sel = m.info["selected"][0]
        parts = tag.geometries[sel["geometry"]].parts
        assert len(parts) == len(sel["geosets"])
        for part, gi in zip(parts, sel["geosets"], strict=True):
            gs = m.geosets[gi]
            assert gs.bone_indices.max() < n_nodes
            if len(part.compressed):
                c = G.decode_compressed(part.compressed)
                expect = np.where(c["nodes"] < 0, 0, c["nodes"])
                assert np.array_equal(gs.bone_indices[:, :2], expect)
                compared += len(part.compressed)
    assert compared > 1000
    fp = load_model(path_of(CYBORG_FP))
    used = set()
    for gs in fp.geosets:
        used.update(np.unique(gs.bone_indices[gs.bone_weights > 0]).tolist())
    assert len(used) > 22  # more nodes than one part's table can name


def test_lods_regions_and_permutations():
    p = path_of(CYBORG)
    sizes = [len(load_model(p, lod=lod).geosets) for lod in ("super_high", "high", "medium", "low", "super_low")]
    assert sizes == [4, 4, 4, 4, 1]
    verts = [sum(len(g.vertices) for g in load_model(p, lod=i).geosets) for i in range(5)]
    assert verts == sorted(verts, reverse=True) and verts[0] == 2256
    low = load_model(p, lod="super low")
    assert low.info["selected"][0]["geometry"] == 4 and low.geosets[0].lod_name == "super_low"

    marine = path_of(MARINE)
    m = load_model(marine)
    assert [r["chosen"] for r in m.info["regions"]] == [0, 0, 0, 0]
    assert len(m.info["selected"]) == 4
    m2 = load_model(marine, permutation={"head": "head_fred-12"})
    head = m2.info["regions"][1]
    assert head["chosen"] == 3 and head["chosen_by"] == "requested"
    assert m2.info["selected"][1]["geometry"] == 40
    m3 = load_model(marine, regions=["head", 3])
    assert [r["selected"] for r in m3.info["regions"]] == [False, True, False, True]
    assert {g.selection_group for g in m3.geosets} == {1, 3}
    m4 = load_model(marine, permutation=1)  # index 1 where a region has it, 0 elsewhere
    assert [r["chosen"] for r in m4.info["regions"]] == [1, 1, 0, 0]
    with pytest.raises(ValueError, match="no region"):
        load_model(marine, regions=["tail"])
    with pytest.raises(ValueError, match="permutation"):
        load_model(marine, permutation="nobody")

    # A permutation with a different super-high geometry than its other LODs.
    d = path_of(DEBRIS)
    wall = load_model(d, permutation="fore wall")
    assert wall.info["selected"][0]["geometry"] == 1
    assert load_model(d, permutation="fore wall", lod="high").info["selected"][0]["geometry"] == 0


def test_banshee_damaged_permutation():
    p = path_of(f"{MONACO}/vehicles/banshee/banshee.gbxmodel")
    base = load_model(p)
    damaged = load_model(p, permutation="~damaged")
    # LODs super high..super low: __base (0, 1, 2, 3, 3), ~damaged (4, 5, 6, 7, 3).
    assert base.info["selected"][0]["geometry"] == 0 and damaged.info["selected"][0]["geometry"] == 4
    assert load_model(p, permutation="~damaged", lod="high").info["selected"][0]["geometry"] == 5
    assert load_model(p, permutation=1, lod="super_low").info["selected"][0]["geometry"] == 3


def bitmap_image(loaded, index):
    """The image the renderer draws texture `index` of a Halo model with (its context's texture
    source, as renderer.texture_set asks it), or None for an index the model does not have."""
    model, context = loaded
    return context.texture_source.image(model, index, AssetSearch([], []))


# -- shaders, bitmaps, textures ----------------------------------------------------------------------

def test_cyborg_shaders_and_base_map():
    loaded = load(path_of(CYBORG))
    m = loaded.model
    shaders = m.info["shaders"]
    assert [s["resolved"] for s in shaders] == [True] * 4
    assert [s["class"] for s in shaders] == ["schi", "schi", "soso", "soso"]
    assert [s["blend"] for s in shaders] == ["add", "add", "alpha tested", "alpha tested"]
    assert [mat.layers[0].filter_mode for mat in m.materials] == [3, 3, 1, 1]
    assert m.materials[2].shader == "characters\\cyborg\\shaders\\armor.shader_model"
    assert [t.path for t in m.textures] == ["characters\\cyborg\\bitmaps\\cyborg.bitmap"]
    assert not m.diagnostics
    img = bitmap_image(loaded, 0)
    assert img.shape == (512, 512, 4) and img.dtype == np.uint8
    assert img[..., :3].std() > 20
    assert bitmap_image(loaded, 0) is img  # cached
    assert bitmap_image(loaded, 1) is None


def test_tree_shaders_two_sided_alpha_tested_leaves():
    loaded = load(path_of(TREE))
    m = loaded.model
    assert not m.diagnostics
    by_shader = {s["path"].rsplit("\\", 1)[-1]: s for s in m.info["shaders"]}
    leaves = m.materials[by_shader["tree_leafy_leaves"]["material"]].layers[0]
    trunk = m.materials[by_shader["tree_leafy_trunk"]["material"]].layers[0]
    assert leaves.filter_mode == 1 and leaves.shading_flags & 0x10
    # Neither sets 'not alpha tested': Halo alpha-tests both (the trunk's DXT1 map is opaque anyway).
    assert trunk.filter_mode == 1 and not trunk.shading_flags & 0x10
    img = bitmap_image(loaded, leaves.texture_id)
    assert img.shape == (256, 256, 4)
    assert 0.3 < (img[..., 3] < 128).mean() < 0.95  # DXT3 alpha cut-out
    trunk_img = bitmap_image(loaded, trunk.texture_id)
    assert trunk_img.shape == (256, 64, 4)


def test_missing_shaders_get_flat_colours_and_diagnostics():
    loaded = load(path_of(MARINE))
    m = loaded.model
    assert not any(s["resolved"] for s in m.info["shaders"])
    missing = [d for d in m.diagnostics if "not found under the tag root" in d.message]
    assert len(missing) == 21
    colours = {tuple(t["flat_color"]) for t in m.info["textures"]}
    assert len(colours) > 10 and all(64 <= c <= 223 for col in colours for c in col[:3])
    assert all(t.path == "" and t.replaceable_id == 0 for t in m.textures)
    img = bitmap_image(loaded, 0)
    assert img.shape == (1, 1, 4) and tuple(img[0, 0]) == tuple(m.info["textures"][0]["flat_color"])
    again = load_model(path_of(MARINE))
    assert again.info["textures"] == m.info["textures"]  # deterministic


def test_copied_tree_uses_tag_root_option(tmp_path):
    """Tag root from the option, case-insensitive lookup, and a missing bitmap -> flat colour."""
    src = path_of(TREE).parent
    root = tmp_path / "MyTags"
    dst = root / "Scenery" / "TREES" / "tree_leafy"
    shutil.copytree(src, dst)
    (dst / "bitmaps" / "tree_leafy_trunk.bitmap").unlink()
    m = load_model(dst / "tree_leafy.gbxmodel", tag_root=root)
    assert all(s["resolved"] for s in m.info["shaders"])
    assert sum(1 for t in m.info["textures"] if t["file"]) == 1
    assert any("tree_leafy_trunk.bitmap" in d.message and "not found" in d.message for d in m.diagnostics)
    no_root = load_model(dst / "tree_leafy.gbxmodel")  # no folder named "tags" above it
    assert not any(s["resolved"] for s in no_root.info["shaders"])


def test_corrupt_bitmap_falls_back_to_flat_colour(tmp_path):
    """A bitmap tag whose pixels are cut short: its texture is drawn in the shader's flat colour, with
    a diagnostic naming the base map (the reader keeps the bytes it read: nothing is read again later)."""
    src = path_of(TREE).parent
    root = tmp_path / "tags"
    dst = root / "scenery" / "trees" / "tree_leafy"
    shutil.copytree(src, dst)
    whole = load(dst / "tree_leafy.gbxmodel")
    tid = next(t["index"] for t in whole.model.info["textures"] if t["file"])
    f = whole.model.info["textures"][tid]["file"]
    assert bitmap_image(whole, tid).shape != (1, 1, 4)
    data = bytearray(open(f, "rb").read())
    open(f, "wb").write(bytes(data[:-40000]))  # the pixels are now cut short
    m = load(dst / "tree_leafy.gbxmodel")

    def drawn_from_bitmaps(loaded) -> int:
        return sum(bitmap_image(loaded, i).shape != (1, 1, 4) for i in range(len(loaded.model.textures)))

    assert drawn_from_bitmaps(m) == drawn_from_bitmaps(whole) - 1
    assert any("base map" in d.message and "flat colour" in d.message for d in m.model.diagnostics)


CORPUS_BITMAPS = corpus_files("*.bitmap")


@pytest.mark.parametrize("p", CORPUS_BITMAPS, ids=[p.name for p in CORPUS_BITMAPS])
def test_corpus_bitmaps_decode(p):
    from renderer.formats.halo import decode_bitmap_tag, read_bitmap_tag

    data = p.read_bytes()
    tag = read_bitmap_tag(data, str(p))
    e = tag.entries[0]
    img = decode_bitmap_tag(data, str(p))
    assert img.shape == (e.height, e.width, 4) and img.dtype == np.uint8
    assert 16 <= e.width <= 1024 and 16 <= e.height <= 1024
    assert e.format in ("dxt1", "dxt3")
    assert img.reshape(-1, 4).std(axis=0).max() > 5  # not a constant image


def test_command_line_style_options():
    marine = path_of(MARINE)
    m = load_model(marine, regions="head, torso", permutation="2", lod="1")
    assert [r["selected"] for r in m.info["regions"]] == [False, True, False, True]
    assert m.info["regions"][1]["chosen"] == 2 and m.info["lod"] == "high"


def test_markers_are_kept_in_info():
    m = load_model(path_of(CYBORG))
    markers = m.info["regions"][0]["permutations"][0]["markers"]
    assert len(markers) == 8
    assert all(0 <= mk["node"] < 19 and len(mk["rotation"]) == 4 for mk in markers)
    assert "markers" in format_halo_info(m.info)
