"""MDX reading and writing on every corpus file: byte-exact round trips and clear rejections."""

from __future__ import annotations

import pytest
from conftest import CORPUS, corpus_files
from mdx_cases import REJECTED

from renderer.errors import FormatError
from renderer.formats.mdx import read_mdx, write_mdx

MDX_FILES = corpus_files("*.mdx", "*.MDX")
IDS = [str(p.relative_to(CORPUS)) for p in MDX_FILES]


@pytest.mark.parametrize("path", MDX_FILES, ids=IDS)
def test_corpus_file_round_trips_byte_for_byte_or_is_rejected_clearly(path):
    rel = str(path.relative_to(CORPUS))
    data = path.read_bytes()
    if rel in REJECTED:
        with pytest.raises(FormatError) as info:
            read_mdx(data, str(path))
        msg = str(info.value)
        assert str(path) in msg and REJECTED[rel] in msg
        assert info.value.offset is not None
        return
    model = read_mdx(data, str(path))
    assert write_mdx(model) == data


def test_corpus_is_present_and_nearly_all_files_load(corpus):
    accepted = [p for p in MDX_FILES if str(p.relative_to(CORPUS)) not in REJECTED]
    assert len(MDX_FILES) >= 34
    assert len(accepted) >= 29


def test_broken_indices_still_round_trip_when_not_checked(corpus):
    path = CORPUS / "zengfanfan__war3mdlx/test/all.mdx"
    data = path.read_bytes()
    model = read_mdx(data, str(path), check_indices=False)
    assert write_mdx(model) == data
    assert any("PVTX index 1" in d.message for d in model.diagnostics)


def test_versions_seen_in_the_corpus(corpus):
    versions = {}
    for p in MDX_FILES:
        if str(p.relative_to(CORPUS)) in REJECTED:
            continue
        versions.setdefault(read_mdx(p.read_bytes(), str(p)).version, p)
    assert {800, 1000, 1100} <= set(versions)


def test_reforged_geosets_keep_skin_tangents_and_slots(corpus):
    girl = read_mdx((CORPUS / "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/"
                     "VillagersReReforged/Girl2.mdx").read_bytes())
    assert girl.version == 1000 and len(girl.bones) == 170
    g = girl.geosets[0]
    assert g.skin is not None and g.skin.shape == (len(g.vertices), 8)
    assert g.tangents is not None and g.tangents.shape == (len(g.vertices), 4)
    assert girl.bind_pose is not None and girl.bind_pose.shape[1] == 12
    assert girl.materials[0].shader in ("Shader_HD_DefaultUnit", "")
    golem = read_mdx((CORPUS / "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/"
                      "HarvestGolem/HarvestGolem.mdx").read_bytes())
    assert golem.version == 1100
    layer = golem.materials[0].layers[0]
    assert [(s.texture_id, s.slot) for s in layer.textures] == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]
    assert layer.shader_type_id == 1
    assert len(golem.popcorn_emitters) == 2


def test_geometry_is_numpy_read_straight_from_the_buffer(corpus):
    data = (CORPUS / "nazarpunk__wc3-map-edemium-legacy/map/war3mapImported/Ghost.mdx").read_bytes()
    m = read_mdx(data)
    g = max(m.geosets, key=lambda g: len(g.vertices))
    assert g.vertices.dtype.str == "<f4" and g.vertices.shape[1] == 3
    # A view on the file's bytes, not a copy built element by element.
    assert g.vertices.base is not None and not g.vertices.flags.owndata
    t = next(iter(m.bones[0].node_tracks.values()), None) if m.bones[0].node_tracks else None
    if t is not None:
        assert not t.keys.flags.owndata
