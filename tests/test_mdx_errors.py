"""Bad MDX input: one error type naming file, place, offset and problem; diagnostics for oddities."""

from __future__ import annotations

import random
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mdx_build import everything

from renderer.errors import FormatError
from renderer.formats.mdx import chunk_table, read_mdx, write_mdx

GOOD = write_mdx(everything(1000))
GOOD800 = write_mdx(everything(800))


def _chunk_at(data: bytes, tag: str) -> tuple[int, int]:
    for t, off, size in chunk_table(data):
        if t == tag:
            return off, size
    raise AssertionError(tag)


def _raises(data: bytes, *fragments: str) -> FormatError:
    with pytest.raises(FormatError) as info:
        read_mdx(data, "bad.mdx")
    msg = str(info.value)
    assert msg.startswith("bad.mdx: "), msg
    for f in fragments:
        assert f in msg, msg
    return info.value


def test_not_an_mdx_file():
    e = _raises(b"RIFF\0\0\0\0", "not an MDX file")
    assert e.offset == 0


@pytest.mark.parametrize("data", [GOOD, GOOD800], ids=["v1000", "v800"])
def test_every_truncation_raises_format_error_or_keeps_trailing_bytes(data):
    ends = {off + 8 + size for _, off, size in chunk_table(data)}
    for cut in range(0, len(data), max(1, len(data) // 400)):
        try:
            m = read_mdx(data[:cut], "cut.mdx")
        except FormatError as e:
            assert e.offset is not None and e.path == "cut.mdx"
            continue
        # Only a cut inside a chunk header (< 8 bytes) or exactly at a chunk boundary loads.
        assert cut in ends or cut == 4 or len(m.trailing) < 8


def test_chunk_size_past_the_end():
    off, size = _chunk_at(GOOD, "GEOS")
    bad = bytearray(GOOD)
    bad[off + 4 : off + 8] = struct.pack("<I", len(GOOD))
    e = _raises(bytes(bad), "chunk GEOS", "runs past the end of the file")
    assert e.offset == off + 4


def test_count_larger_than_the_bytes_left_allocates_nothing_big():
    off, _ = _chunk_at(GOOD, "GEOS")
    bad = bytearray(GOOD)
    vrtx = GOOD.index(b"VRTX", off)
    bad[vrtx + 4 : vrtx + 8] = struct.pack("<I", 0x7FFFFFF0)
    tracemalloc.start()
    try:
        e = _raises(bytes(bad), "chunk GEOS geoset 0", "VRTX count 2147483632")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert e.offset == vrtx + 4
    assert peak < 8 * 1024 * 1024


def test_inclusive_size_that_disagrees_with_the_contents():
    off, size = _chunk_at(GOOD, "GEOA")
    bad = bytearray(GOOD)
    bad[off + 8 : off + 12] = struct.pack("<I", size + 100)
    _raises(bytes(bad), "chunk GEOA geoset animation 0", "inclusive size")
    # Too small to hold its own fixed fields.
    bad[off + 8 : off + 12] = struct.pack("<I", 12)
    _raises(bytes(bad), "chunk GEOA geoset animation 0", "geoset animation fields needs 24 bytes")


def _modified(version: int, change) -> bytes:
    m = everything(version)
    change(m)
    return write_mdx(m)


def test_pvtx_past_the_vertex_count():
    def change(m):
        f = m.geosets[0].faces.copy()
        f[4] = 999
        m.geosets[0].faces = f
    e = _raises(_modified(800, change), "chunk GEOS geoset 0", "PVTX index 4 is vertex 999, past the 24 vertices")
    assert GOOD800[e.offset : e.offset + 4] == b"PVTX"


def test_gndx_past_the_matrix_groups():
    def change(m):
        g = m.geosets[0].vertex_groups.copy()
        g[3] = 5
        m.geosets[0].vertex_groups = g
    _raises(_modified(800, change), "GNDX entry 3 names matrix group 5, past the 1 groups in MTGC")


def test_mats_naming_a_missing_node():
    def change(m):
        m.geosets[0].matrix_indices = np.array([42], "<u4")
    _raises(_modified(800, change), "chunk GEOS geoset 0", "MATS names node 42, but no node has that object id")


def test_layer_naming_a_missing_texture():
    def change(m):
        m.materials[0].layers[1].texture_id = 77
    _raises(_modified(800, change), "chunk MTLS material 0", "layer 1 names texture 77")


def test_index_problems_become_diagnostics_when_not_checked():
    def change(m):
        m.materials[0].layers[1].texture_id = 77
    m = read_mdx(_modified(800, change), "bad.mdx", check_indices=False)
    assert any("names texture 77" in d.message for d in m.diagnostics)


def test_unknown_chunk_and_trailing_garbage_are_diagnostics():
    data = GOOD + b"ZZZZ" + struct.pack("<I", 3) + b"abc" + b"\x00\xff\x13"
    m = read_mdx(data, "odd.mdx")
    messages = [d.message for d in m.diagnostics]
    assert any("unknown chunk 'ZZZZ' (3 bytes)" in x for x in messages)
    assert any("3 trailing bytes after the last chunk" in x for x in messages)
    assert write_mdx(m) == data
    with pytest.raises(FormatError, match="strict mode"):
        read_mdx(data, "odd.mdx", strict=True)


def test_invalid_pre2_filter_mode_loads_with_a_diagnostic():
    def change(m):
        m.particle_emitters2[1].filter_mode = 9
    data = _modified(800, change)
    m = read_mdx(data, "fx.mdx")
    assert m.particle_emitters2[1].filter_mode == 9  # kept for a byte-exact rewrite
    d = [d for d in m.diagnostics if "filter mode" in d.message]
    assert d and "invalid filter mode 9; drawn as Blend" in d[0].message and "Smoke" in d[0].where
    with pytest.raises(FormatError, match="invalid filter mode 9"):
        read_mdx(data, "fx.mdx", strict=True)


def test_bad_interpolation_type():
    off, _ = _chunk_at(GOOD, "TXAN")
    at = GOOD.index(b"KTAT", off)
    bad = bytearray(GOOD)
    bad[at + 8 : at + 12] = struct.pack("<I", 7)
    e = _raises(bytes(bad), "track KTAT has interpolation 7")
    assert e.offset == at + 8


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        i = rng.randrange(len(b))
        if kind < 0.5:
            b[i] = rng.randrange(256)
        elif kind < 0.8:  # a corrupt 32-bit count or size
            b[i : i + 4] = struct.pack("<I", rng.choice([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, rng.randrange(1 << 32)]))
        else:
            del b[i : i + rng.randint(1, 16)]
    return bytes(b)


def _only_format_errors(data: bytes) -> None:
    try:
        m = read_mdx(data, "fuzz.mdx")
    except FormatError as e:
        assert e.path == "fuzz.mdx" and e.problem
        return
    write_mdx(m)  # whatever loads must also write


def test_mutation_fuzz_only_format_error_escapes():
    rng = random.Random(1234)
    seeds = [GOOD, GOOD800]
    for _ in range(1500):
        _only_format_errors(_mutate(rng.choice(seeds), rng))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hypothesis_fuzz_only_format_error_escapes(data):
    base = data.draw(st.sampled_from([GOOD, GOOD800]))
    pos = data.draw(st.integers(0, len(base) - 1))
    patch = data.draw(st.binary(min_size=1, max_size=8))
    _only_format_errors(base[:pos] + patch + base[pos + len(patch) :])
