"""Bad Halo model tags: one error type naming file, block, offset and problem; diagnostics; fuzzing."""

from __future__ import annotations

import random
import struct
import time
import tracemalloc

import numpy as np
import pytest
from conftest import CORPUS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_halo_tagbuild import model_tag, uncompressed

from renderer.errors import FormatError
from renderer.formats.halo import model_tag as MT
from renderer.formats.halo import read_halo_model, read_model_tag

GOOD = model_tag()
NODES_AT = 64 + MT.BLOCKS["nodes"]


def _raises(data: bytes, *fragments: str) -> FormatError:
    with pytest.raises(FormatError) as info:
        read_halo_model(data, "bad.gbxmodel")
    msg = str(info.value)
    assert msg.startswith("bad.gbxmodel: "), msg
    for f in fragments:
        assert f in msg, msg
    return info.value


def _set(data: bytes, offset: int, fmt: str, *values) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


def test_header_problems():
    e = _raises(b"\0" * 10, "64-byte header")
    assert e.offset == 0 and e.where == "tag header"
    assert _raises(GOOD[:0x3C] + b"BLAM" + GOOD[0x40:], "not a Halo tag").offset == 0x3C
    assert _raises(GOOD[:0x24] + b"bitm" + GOOD[0x28:], "tag class").offset == 0x24
    assert _raises(_set(GOOD, 0x38, ">H", 4), "version 4 is not supported").offset == 0x38
    # mode with mod2's version and the other way round
    assert _raises(GOOD[:0x24] + b"mode" + GOOD[0x28:], "'mode' version 5").offset == 0x38


def test_header_oddities_are_diagnostics():
    m = read_halo_model(_set(GOOD, 0x2C, ">I", 12), "odd.gbxmodel")
    # The checksum covers only the bytes after the header, so it still matches.
    assert [d.offset for d in m.diagnostics if d.where == "tag header"] == [0x2C]
    m = read_halo_model(_set(GOOD, 0x3A, ">BB", 3, 4), "odd.gbxmodel")
    assert any(d.offset == 0x3A for d in m.diagnostics)


def test_huge_count_is_refused_before_allocation():
    bad = _set(GOOD, NODES_AT, ">I", 0xFFFFFFF0)
    tracemalloc.start()
    try:
        e = _raises(bad, "nodes", "ModelNode elements", "only")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert e.where == "nodes" and e.offset == 64 + MT.BODY_SIZE  # where the node array would start
    assert peak < 4 * 1024 * 1024


@pytest.mark.parametrize("block", ["markers", "regions", "geometries", "shaders"])
def test_every_top_level_count(block):
    e = _raises(_set(GOOD, 64 + MT.BLOCKS[block], ">I", 1 << 30), block)
    assert e.where == block


def test_child_counts_name_their_element_path():
    tag = read_model_tag(GOOD, "g")
    part = tag.geometries[0].parts[0]
    for field, off in (("uncompressed_vertices", 32), ("compressed_vertices", 44), ("triangles", 56)):
        e = _raises(_set(GOOD, part.offset + off, ">I", 99999), f"geometries[0].parts[0].{field}")
        assert e.offset is not None
    perm = tag.regions[0].permutations[0]
    _raises(_set(GOOD, perm.offset + 76, ">I", 5000), "regions[0].permutations[0].markers")
    _raises(_set(GOOD, tag.regions[0].offset + 64, ">I", 5000), "regions[0].permutations")
    _raises(_set(GOOD, tag.geometries[0].offset + 36, ">I", 5000), "geometries[0].parts", "GBXModelGeometryPart")


def test_tag_reference_path_length():
    at = read_model_tag(GOOD, "g").shaders[0].offset
    _raises(_set(GOOD, at + 8, ">I", 4000), "shaders[0].shader", "over the limit")
    _raises(_set(GOOD, at + 8, ">I", 200), "shaders[0].shader", "remain")


def test_every_truncation_raises():
    for cut in range(len(GOOD)):
        with pytest.raises(FormatError) as e:
            read_halo_model(GOOD[:cut], "cut.gbxmodel")
        assert e.value.path == "cut.gbxmodel" and e.value.offset is not None


def test_trailing_bytes_are_a_diagnostic():
    m = read_halo_model(GOOD + b"junk", "trail.gbxmodel")
    d = [d for d in m.diagnostics if d.where == "end of tag"]
    assert d and d[0].offset == len(GOOD) and "4 bytes" in d[0].message
    with pytest.raises(FormatError, match="strict"):
        read_halo_model(GOOD + b"junk", "trail.gbxmodel", strict=True)


def _one_part(**part) -> bytes:
    u = part.pop("uncompressed", uncompressed([(0, 0, 0), (1, 0, 0), (0, 1, 0)]))
    return model_tag(geometries=[[{"shader": 0, "uncompressed": u, "strip": [0, 1, 2], **part}]])


def test_bad_indices_are_diagnostics():
    m = read_halo_model(_one_part(shader=7), "s.gbxmodel")
    assert any("shader index 7" in d.message for d in m.diagnostics)
    assert m.materials[m.geosets[0].material_id].shader == "<missing shader>"
    m = read_halo_model(_one_part(strip=[0, 1, 2, 9]), "i.gbxmodel")
    assert any("past the 3" in d.message for d in m.diagnostics) and len(m.geosets[0].faces) == 3
    u = uncompressed([(0, 0, 0), (1, 0, 0), (0, 1, 0)], nodes=[(5, -1), (-1, -1), (0, 40)])
    m = read_halo_model(_one_part(uncompressed=u), "n.gbxmodel")
    assert any("outside 0..0" in d.message for d in m.diagnostics)
    assert m.geosets[0].bone_indices.max() == 0
    u = uncompressed([(0, 0, 0), (np.nan, 0, 0), (0, 1, 0)], weights=[(np.nan, 0), (0, 0), (-1, 2)])
    m = read_halo_model(_one_part(uncompressed=u), "f.gbxmodel")
    assert np.isfinite(m.geosets[0].vertices).all() and np.allclose(m.geosets[0].bone_weights.sum(axis=1), 1)


def test_bad_nodes_and_lods_are_diagnostics():
    nodes = (("a", 1, (0, 0, 0), (0, 0, 0, 1)), ("b", 0, (1, 0, 0), (0, 0, 0, 1)), ("c", 9, (0, 0, 0), (0, 0, 0, 0)))
    m = read_halo_model(model_tag(nodes=nodes), "nodes.gbxmodel")
    assert sum("treated as a root" in d.message for d in m.diagnostics) == 2
    assert np.isfinite(m.pivots).all()
    regions = (("r", (("p", (0, 0, 0, 0, 3)),)),)  # super high names geometry 3 of 1
    m = read_halo_model(model_tag(regions=regions), "lod.gbxmodel")
    assert any("super_high geometry index 3" in d.message for d in m.diagnostics)
    assert m.info["selected"][0]["lod"] == "high" and len(m.geosets) == 1
    regions = (("r", (("p", (-1, -1, -1, -1, -1)),)), ("empty", ()))
    m = read_halo_model(model_tag(regions=regions), "none.gbxmodel")
    assert not m.geosets and any("no LOD" in d.message for d in m.diagnostics)


def test_local_nodes_on_xbox_tags_and_bad_local_indices():
    m = read_halo_model(model_tag(cls=b"mode", flags=2), "x.model")
    assert any("'mode' tag" in d.message for d in m.diagnostics)
    u = uncompressed([(0, 0, 0), (1, 0, 0), (0, 1, 0)], nodes=[(0, -1), (3, -1), (1, 0)])
    data = model_tag(geometries=[[{"shader": 0, "uncompressed": u, "strip": [0, 1, 2], "local_nodes": [0, 0]}]],
                     flags=2)
    m = read_halo_model(data, "l.gbxmodel")
    assert any("local nodes outside 0..1" in d.message for d in m.diagnostics)


# -- fuzzing -----------------------------------------------------------------------------------------

FUZZ_BASES = [GOOD, model_tag(cls=b"mode"), model_tag(
    nodes=(("a", -1, (0, 0, 0), (0, 0, 0, 1)), ("b", 0, (1, 0, 0), (0, 0, 0.6, 0.8))),
    regions=(("r", (("p", (0, 0, 0, 0, 0)), ("q", (0, 0, 0, 0, 0)))),), markers=(("m", ((0, 0, 1),)),),
    shaders=((b"soso", "a\\b"), (b"schi", "c\\d")))]
_HALO = CORPUS / "halo" / "aLTis94__Halo-CE-Monaco" / "tags"
for _p in (_HALO / "scenery/rocks/boulder/boulder.gbxmodel",
           _HALO / "levels/b30/devices/interior tech objects/control door/control door.model",
           _HALO / "weapons/plasma_cannon/fp/fp.gbxmodel"):
    if _p.exists():
        FUZZ_BASES.append(_p.read_bytes())
TAG_ROOT = CORPUS / "aLTis94__Halo-CE-Monaco" / "tags"


def _only_format_errors(data: bytes) -> None:
    start = time.perf_counter()
    try:
        m = read_halo_model(data, "fuzz.gbxmodel", tag_root=TAG_ROOT if TAG_ROOT.is_dir() else None)
    except FormatError as e:
        assert e.path == "fuzz.gbxmodel"
    else:
        for gs in m.geosets:
            assert len(gs.faces) == 0 or int(gs.faces.max()) < len(gs.vertices)
            assert gs.bone_indices is None or int(gs.bone_indices.max()) < max(len(m.bones), 1)
    assert time.perf_counter() - start < 5.0  # no hang


def _mutate(rng: random.Random, base: bytes) -> bytes:
    data = bytearray(base)
    kind = rng.randrange(6)
    if kind == 0:  # flip a few bytes
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif kind == 1:  # a big or small u32 at an aligned offset (counts, lengths)
        at = rng.randrange(0, len(data) - 4) & ~3
        struct.pack_into(">I", data, at, rng.choice([0, 1, 2, 255, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF,
                                                       rng.randrange(1 << 32)]))
    elif kind == 2:  # truncate
        del data[rng.randrange(len(data)) :]
    elif kind == 3:  # insert bytes
        at = rng.randrange(len(data))
        data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    elif kind == 4:  # delete bytes
        at = rng.randrange(len(data))
        del data[at : at + rng.randint(1, 16)]
    else:  # a float field -> NaN / inf / huge
        at = rng.randrange(64, len(data) - 4) & ~3
        struct.pack_into(">f", data, at, rng.choice([float("nan"), float("inf"), -1e38, 1e30]))
    return bytes(data)


def test_fuzz_mutations_only_raise_format_error():
    rng = random.Random(6)
    with np.errstate(all="raise"):
        for i in range(1000):
            _only_format_errors(_mutate(rng, FUZZ_BASES[i % len(FUZZ_BASES)]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hypothesis_fuzz_only_format_error_escapes(data):
    base = data.draw(st.sampled_from(FUZZ_BASES[:4]))
    pos = data.draw(st.integers(0, len(base) - 1))
    patch = data.draw(st.binary(min_size=1, max_size=8))
    with np.errstate(all="raise"):
        _only_format_errors(base[:pos] + patch + base[pos + len(patch) :])
