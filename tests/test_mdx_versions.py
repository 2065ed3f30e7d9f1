"""Every version's layout, written by our writer and read back: bytes, sizes and fields."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from mdx_build import everything

from renderer.formats.mdx import chunk_table, read_mdx, write_mdx
from renderer.model import same


@pytest.mark.parametrize("version", [800, 900, 1000, 1100, 1200])
def test_every_chunk_round_trips_in_every_version(version):
    m = everything(version)
    data = write_mdx(m)
    back = read_mdx(data, f"v{version}.mdx")
    assert back.diagnostics == []
    assert same(back, m)
    assert write_mdx(back) == data
    tags = [t for t, _, _ in chunk_table(data)]
    expected = {"VERS", "MODL", "SEQS", "GLBS", "MTLS", "TEXS", "SNDS", "TXAN", "GEOS", "GEOA", "BONE", "LITE",
                "ATCH", "PIVT", "PREM", "PRE2", "RIBB", "EVTS", "CAMS", "CLID", "HELP"}
    if version >= 900:
        expected |= {"BPOS", "FAFX", "CORN"}
    assert expected == set(tags)


def _chunk(data: bytes, tag: str) -> bytes:
    for t, off, size in chunk_table(data):
        if t == tag:
            return data[off + 8 : off + 8 + size]
    raise AssertionError(tag)


def test_version_dependent_record_sizes():
    sizes = {}
    for v in (800, 900, 1000, 1100, 1200):
        data = write_mdx(everything(v))
        lite = _chunk(data, "LITE")
        node_size = struct.unpack_from("<I", lite, 4)[0]
        sizes[v] = struct.unpack_from("<I", lite, 0)[0] - node_size
        mtls = _chunk(data, "MTLS")
        if v == 800:
            assert mtls[12:16] == b"LAYS"
        elif v in (900, 1000):
            assert mtls[12:33] == b"Shader_HD_DefaultUnit" and mtls[92:96] == b"LAYS"
        else:
            assert mtls[12:16] == b"LAYS"
    # Light fields: 48 bytes (with the inclusive size) plus the KLAV track; 1200 adds shadowIntensity.
    klav = 16 + 2 * 8
    assert sizes[800] == sizes[1100] == 48 + klav
    assert sizes[1200] == 52 + klav


def test_layer_sizes_per_version():
    lens = {}
    for v in (800, 900, 1000, 1100):
        m = everything(v)
        m.materials[1].layers[0].tracks = {}
        m.materials[1].layers[0].textures = []
        data = write_mdx(m)
        mtls = _chunk(data, "MTLS")
        first = struct.unpack_from("<I", mtls, 0)[0]
        second = mtls[first:]
        head = 12 + (80 if v in (900, 1000) else 0) + 8
        lens[v] = struct.unpack_from("<I", second, head)[0]
    assert lens == {800: 28, 900: 32, 1000: 52, 1100: 60}


def test_v900_layer_fresnel_is_detected_per_layer():
    m = everything(900)
    m.materials[1].layers[0].has_fresnel = True
    m.materials[1].layers[0].fresnel_opacity = 0.25
    data = write_mdx(m)
    back = read_mdx(data)
    assert back.materials[1].layers[0].has_fresnel and back.materials[1].layers[0].fresnel_opacity == 0.25
    assert not back.materials[0].layers[0].has_fresnel
    assert write_mdx(back) == data


def test_newer_version_keeps_unknown_fields_with_a_diagnostic():
    m = everything(1200)
    m.version = 1300
    m.lights[0].extra = b"\x01\x00\x00\x00" * 3  # fields a 1300 light might add
    data = write_mdx(m)
    back = read_mdx(data, "v1300.mdx")
    assert back.version == 1300
    assert back.lights[0].extra == m.lights[0].extra
    assert any("version 1300 is newer than 1200" in d.message for d in back.diagnostics)
    assert write_mdx(back) == data


def test_newer_version_keeps_a_chunk_it_cannot_parse_as_raw_bytes():
    m = everything(1200)
    m.version = 1400
    data = bytearray(write_mdx(m))
    for tag, off, size in chunk_table(bytes(data)):
        if tag == "SEQS":  # pretend 1400 grew the sequence record by 4 bytes
            data[off + 4 : off + 8] = struct.pack("<I", size + 4)
            data[off + 8 + size : off + 8 + size] = b"\0\0\0\0"
            break
    back = read_mdx(bytes(data), "v1400.mdx")
    assert [c.tag for c in back.unknown_chunks] == ["SEQS"]
    assert any("chunk SEQS" in d.where and "kept as raw bytes" in d.message for d in back.diagnostics)
    assert write_mdx(back) == bytes(data)


def test_chunk_order_empty_chunks_and_name_padding_survive():
    m = everything(800)
    data = bytearray(write_mdx(m))
    # Garbage after a name's terminating NUL, and a non-UTF-8 byte in a name.
    for tag, off, _ in chunk_table(bytes(data)):
        if tag == "SEQS":
            data[off + 8 : off + 8 + 8] = b"St\xe9nd\0XY"
    data += b"PREM" + struct.pack("<I", 0)
    back = read_mdx(bytes(data))
    assert back.sequences[0].name == "St\udce9nd"
    assert back.layout[-1] == ("PREM", 0)
    assert write_mdx(back) == bytes(data)


def test_model_built_without_layout_writes_canonical_order():
    m = everything(800)
    tags = [t for t, _, _ in chunk_table(write_mdx(m))]
    assert tags[:4] == ["VERS", "MODL", "SEQS", "GLBS"]
    assert tags.index("GEOS") < tags.index("BONE") < tags.index("PIVT")


def test_track_keys_are_numpy_structured_arrays():
    m = everything(1000)
    back = read_mdx(write_mdx(m))
    t = back.texture_animations[0].tracks["KTAR"]
    assert t.interpolation == 2
    assert t.keys.dtype.names == ("frame", "value", "in_tan", "out_tan")
    np.testing.assert_array_equal(t.frames, [0, 500])
    np.testing.assert_array_equal(t.values[1], [0, 0, 1, 0])
