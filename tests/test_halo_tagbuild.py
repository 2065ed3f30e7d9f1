"""Hand-made Halo tags for the tests: model tags, shader_model / transparent shaders and bitmap tags.

Built with the loader's own dtypes in the HEK's depth-first child order, with a correct checksum.
The tests at the bottom check that what is built here reads back as built.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from renderer.formats.halo import model_tag as MT
from renderer.formats.halo.geometry import compress_vector

HEADER = struct.Struct(">I32s4sIIQHBB4s")


def header(cls: bytes, version: int, rest: bytes) -> bytes:
    checksum = zlib.crc32(rest) ^ 0xFFFFFFFF
    return HEADER.pack(0, b"", cls, checksum, 64, 0, version, 0, 255, b"blam") + rest


def reflexive(count: int) -> bytes:
    return struct.pack(">III", count, 0, 0)


def dependency(cls: bytes, path: str) -> bytes:
    return struct.pack(">4sIII", cls, 0, len(path), 0xFFFFFFFF)


def path_child(path: str) -> bytes:
    return path.encode("latin-1") + b"\0" if path else b""


def _name(s: str) -> bytes:
    return s.encode("latin-1")[:31]


def uncompressed(positions, normals=None, uvs=None, nodes=None, weights=None) -> np.ndarray:
    n = len(positions)
    a = np.zeros(n, MT.UNCOMPRESSED_VERTEX)
    a["position"] = positions
    a["normal"] = normals if normals is not None else (0, 0, 1)
    a["binormal"] = (0, 1, 0)
    a["tangent"] = (1, 0, 0)
    a["uv"] = uvs if uvs is not None else 0
    a["node"] = nodes if nodes is not None else (0, -1)
    a["weight"] = weights if weights is not None else (1, 0)
    return a


def compressed_from(u: np.ndarray) -> np.ndarray:
    """The compressed form of uncompressed vertices (global nodes), as the HEK's tool writes it."""
    c = np.zeros(len(u), MT.COMPRESSED_VERTEX)
    c["position"] = u["position"]
    c["normal"] = compress_vector(u["normal"])
    c["binormal"] = compress_vector(u["binormal"])
    c["tangent"] = compress_vector(u["tangent"])
    c["uv"] = np.round(np.clip(u["uv"], -1, 1) * 32767).astype(np.int16)
    nodes = u["node"].astype(np.int32)
    c["node0"] = np.where(nodes[:, 0] < 0, -3, nodes[:, 0] * 3)
    c["node1"] = np.where(nodes[:, 1] < 0, -3, nodes[:, 1] * 3)
    c["weight0"] = np.round(u["weight"][:, 0] * 32767).astype(np.uint16)
    return c


def model_tag(
    cls: bytes = b"mod2",
    nodes=(("root", -1, (0, 0, 0), (0, 0, 0, 1)),),
    regions=(("body", (("__base", (0, 0, 0, 0, 0)),)),),
    geometries=None,
    shaders=((b"soso", "shaders\\plain"),),
    flags: int = 0,
    base_map_scale=(0.0, 0.0),
    markers=(),
) -> bytes:
    """A model tag. regions: (name, ((perm name, lods super low..super high), ...)).

    geometries: list of geometries, each a list of part dicts with keys shader, uncompressed (array),
    compressed (array), strip (flat u16 list), local_nodes (list, gbx only), flags."""
    if geometries is None:
        tri = uncompressed([(0, 0, 0), (1, 0, 0), (0, 1, 0)], uvs=[(0, 0), (1, 0), (0, 1)])
        geometries = [[{"shader": 0, "uncompressed": tri, "compressed": compressed_from(tri), "strip": [0, 1, 2]}]]
    gbx = cls == b"mod2"
    body = bytearray(MT.BODY_SIZE)
    struct.pack_into(">Ii5f", body, 0, flags, 0, 400, 250, 120, 50, 5)
    struct.pack_into(">2f", body, 48, *base_map_scale)
    for name, count in (("markers", len(markers)), ("nodes", len(nodes)), ("regions", len(regions)),
                        ("geometries", len(geometries)), ("shaders", len(shaders))):
        body[MT.BLOCKS[name] : MT.BLOCKS[name] + 12] = reflexive(count)
    out = bytearray(body)
    # markers
    mk = np.zeros(len(markers), MT.MARKER)
    for i, (name, instances) in enumerate(markers):
        mk[i]["name"] = _name(name)
        mk[i]["instances"] = len(instances)
    out += mk.tobytes()
    for _marker_name, instances in markers:
        inst = np.zeros(len(instances), MT.MARKER_INSTANCE)
        for j, (r, p, n) in enumerate(instances):
            inst[j]["region"], inst[j]["permutation"], inst[j]["node"] = r, p, n
            inst[j]["rotation"] = (0, 0, 0, 1)
        out += inst.tobytes()
    # nodes
    nd = np.zeros(len(nodes), MT.NODE)
    for i, (name, parent, t, q) in enumerate(nodes):
        nd[i]["name"] = _name(name)
        nd[i]["parent"] = parent
        nd[i]["first_child"] = -1
        nd[i]["next_sibling"] = -1
        nd[i]["translation"] = t
        nd[i]["rotation"] = q
    out += nd.tobytes()
    # regions
    rg = np.zeros(len(regions), MT.REGION)
    for i, (name, perms) in enumerate(regions):
        rg[i]["name"] = _name(name)
        rg[i]["permutations"] = len(perms)
    out += rg.tobytes()
    for _rname, perms in regions:
        pm = np.zeros(len(perms), MT.PERMUTATION)
        for j, (pname, lods) in enumerate(perms):
            pm[j]["name"] = _name(pname)
            pm[j]["lods"] = lods
        out += pm.tobytes()
    # geometries
    gm = np.zeros(len(geometries), MT.GEOMETRY)
    for i, parts in enumerate(geometries):
        gm[i]["parts"] = len(parts)
    out += gm.tobytes()
    part_dt = MT.GBX_PART if gbx else MT.PART
    for parts in geometries:
        pa = np.zeros(len(parts), part_dt)
        for j, p in enumerate(parts):
            pa[j]["flags"] = p.get("flags", 0)
            pa[j]["shader"] = p.get("shader", 0)
            pa[j]["uncompressed"] = len(p.get("uncompressed", ()))
            pa[j]["compressed"] = len(p.get("compressed", ()))
            strip = list(p.get("strip", ()))
            pa[j]["triangles"] = (len(strip) + 2) // 3
            if gbx and p.get("local_nodes") is not None:
                ln = p["local_nodes"]
                pa[j]["local_node_count"] = len(ln)
                pa[j]["local_nodes"][: len(ln)] = ln
        out += pa.tobytes()
        for p in parts:
            u = p.get("uncompressed")
            out += u.tobytes() if u is not None else b""
            c = p.get("compressed")
            out += c.tobytes() if c is not None else b""
            strip = list(p.get("strip", ()))
            strip += [0xFFFF] * (-len(strip) % 3)
            out += np.array(strip, ">u2").tobytes()
    # shaders
    for cls_, path in shaders:
        out += dependency(cls_, path) + b"\0" * 16
    for _cls, path in shaders:
        out += path_child(path)
    return header(cls, MT.CLASSES[cls], bytes(out))


def shader_model(base_map: str, flags: int = 0, map_scale=(1.0, 1.0)) -> bytes:
    body = bytearray(440)
    struct.pack_into(">H", body, 36, 0)
    struct.pack_into(">H", body, 40, flags)
    struct.pack_into(">2f", body, 156, *map_scale)
    body[164:180] = dependency(b"bitm", base_map)
    body[188:204] = dependency(b"bitm", "")
    body[220:236] = dependency(b"bitm", "")
    body[356:372] = dependency(b"bitm", "")
    return header(b"soso", 2, bytes(body) + path_child(base_map))


def shader_chicago(base_map: str, blend: int = 3, flags: int = 0, map_flags: int = 0) -> bytes:
    body = bytearray(108)
    body[41] = flags
    struct.pack_into(">HH", body, 42, 0, blend)
    body[56:72] = dependency(b"lens", "")
    body[72:84] = reflexive(0)
    body[84:96] = reflexive(1)
    m = bytearray(220)
    struct.pack_into(">H", m, 0, map_flags)
    struct.pack_into(">4f", m, 84, 0.0, 1.0, 0.0, 0.0)
    m[108:124] = dependency(b"bitm", base_map)
    return header(b"schi", 1, bytes(body) + bytes(m) + path_child(base_map))


def bitmap_tag(width: int, height: int, fmt: int, pixels: bytes, data_type: int = 0, flags: int = 0,
               mipmaps: int = 0) -> bytes:
    body = bytearray(108)
    struct.pack_into(">IIIQ", body, 48, len(pixels), 0, 0, 0)
    body[84:96] = reflexive(0)
    body[96:108] = reflexive(1)
    d = bytearray(48)
    d[0:4] = b"bitm"
    struct.pack_into(">HHHHHH", d, 4, width, height, 1, data_type, fmt, flags)
    struct.pack_into(">H", d, 20, mipmaps)
    struct.pack_into(">I", d, 24, 0)
    return header(b"bitm", 7, bytes(body) + pixels + bytes(d))


# -- the builder reads back as built --------------------------------------------------------------

def test_built_model_reads_back():
    from renderer.formats.halo import read_model_tag

    data = model_tag(cls=b"mod2", markers=(("m", ((0, 0, 0),)),))
    tag = read_model_tag(data, "built.gbxmodel")
    assert tag.end == len(data) and not tag.diagnostics
    assert tag.header.checksum_ok is True
    assert [n.decode() for n in tag.nodes["name"]] == ["root"]
    assert tag.regions[0].permutations[0].lods == (0, 0, 0, 0, 0)
    assert len(tag.geometries[0].parts[0].uncompressed) == 3
    assert tag.shaders[0].path == "shaders\\plain"
    assert len(tag.markers) == 1 and len(tag.markers[0].instances) == 1
    xbox = read_model_tag(model_tag(cls=b"mode"), "built.model")
    assert xbox.tag_class == "mode" and xbox.geometries[0].parts[0].local_nodes is None


def test_built_shader_and_bitmap_read_back():
    from renderer.formats.halo.bitmap import read_bitmap_tag
    from renderer.formats.halo.shaders import ShaderInfo, read_shader_model, read_shader_transparent

    info = ShaderInfo("soso", "s")
    read_shader_model(shader_model("a\\b"), "s.shader_model", info)
    assert info.base_map == "a\\b"
    info = ShaderInfo("schi", "s")
    read_shader_transparent(shader_chicago("c\\d"), "s.shader_transparent_chicago", info, b"schi")
    assert info.base_map == "c\\d" and info.blend == "add"
    bt = read_bitmap_tag(bitmap_tag(2, 2, 11, bytes(16)), "x.bitmap")
    assert bt.entries[0].format == "a8r8g8b8" and bt.pixels_size == 16
