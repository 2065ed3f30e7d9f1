"""Read a `mode` (Xbox, v4) or `mod2` (PC/Gearbox, v5) model tag file into plain records.

Every block the tag defines is read, in the tag file's depth-first child order (halo-tags.md §1.3):
body -> markers[] (each marker's instances[]) -> nodes[] -> regions[] (each region's permutations[],
each permutation's markers[]) -> geometries[] (each geometry's parts[], each part's uncompressed
vertices[], compressed vertices[], triangles[]) -> shaders[] (each shader reference's path).

Arrays are big-endian numpy structured views on the file bytes. Block names in errors follow the
tag definition (ModelNode, GBXModelGeometryPart, ...) and the element path (`regions[0].permutations[2]`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from renderer.errors import Diagnostic

from .tagfile import HEADER_SIZE, TagCursor, TagHeader, dependency, read_header, tag_string

CLASSES = {b"mode": 4, b"mod2": 5}
BODY_SIZE = 232
BODY = struct.Struct(">Ii5f")  # flags, node list checksum, 5 detail cutoffs (super high .. super low)
BASE_MAP_SCALE = struct.Struct(">2f")  # at body offset 48
BLOCKS = {"markers": 172, "nodes": 184, "regions": 196, "geometries": 208, "shaders": 220}

MODEL_FLAGS = ("blend shared normals", "parts have local nodes", "ignore skinning")
PART_FLAGS = ("stripped internal", "ZONER")
PERMUTATION_FLAGS = ("cannot be chosen randomly",)
# LOD names, best first. Permutations store geometry indices in the reverse order (super low first).
LODS = ("super_high", "high", "medium", "low", "super_low")
MAX_LOCAL_NODES = 22


def _dt(size: int, fields: list[tuple[str, str, int]]) -> np.dtype:
    return np.dtype({"names": [f[0] for f in fields], "formats": [f[1] for f in fields],
                     "offsets": [f[2] for f in fields], "itemsize": size})


MARKER = _dt(64, [("name", "S32", 0), ("magic", ">i2", 32), ("instances", ">u4", 52)])
MARKER_INSTANCE = np.dtype({"names": ["region", "permutation", "node", "translation", "rotation"],
                            "formats": ["u1", "u1", "u1", (">f4", (3,)), (">f4", (4,))],
                            "offsets": [0, 1, 2, 4, 16], "itemsize": 32})
NODE = np.dtype({"names": ["name", "next_sibling", "first_child", "parent", "translation", "rotation", "distance"],
                 "formats": ["S32", ">i2", ">i2", ">i2", (">f4", (3,)), (">f4", (4,)), ">f4"],
                 "offsets": [0, 32, 34, 36, 40, 52, 68], "itemsize": 156})
REGION = _dt(76, [("name", "S32", 0), ("permutations", ">u4", 64)])
PERMUTATION = np.dtype({"names": ["name", "flags", "lods", "markers"],
                        "formats": ["S32", ">u4", (">i2", (5,)), ">u4"],
                        "offsets": [0, 32, 64, 76], "itemsize": 88})
PERMUTATION_MARKER = np.dtype({"names": ["name", "node", "rotation", "translation"],
                               "formats": ["S32", ">i2", (">f4", (4,)), (">f4", (3,))],
                               "offsets": [0, 32, 36, 52], "itemsize": 80})
GEOMETRY = _dt(48, [("flags", ">u4", 0), ("parts", ">u4", 36)])
_PART_FIELDS = {
    "names": ["flags", "shader", "centroid", "uncompressed", "compressed", "triangles"],
    "formats": [">u4", ">i2", (">f4", (3,)), ">u4", ">u4", ">u4"],
    "offsets": [0, 4, 20, 32, 44, 56],
}
PART = np.dtype({**_PART_FIELDS, "itemsize": 104})
GBX_PART = np.dtype({"names": _PART_FIELDS["names"] + ["local_node_count", "local_nodes"],
                     "formats": _PART_FIELDS["formats"] + ["u1", ("u1", (MAX_LOCAL_NODES,))],
                     "offsets": _PART_FIELDS["offsets"] + [107, 108], "itemsize": 132})
UNCOMPRESSED_VERTEX = np.dtype({
    "names": ["position", "normal", "binormal", "tangent", "uv", "node", "weight"],
    "formats": [(">f4", (3,)), (">f4", (3,)), (">f4", (3,)), (">f4", (3,)), (">f4", (2,)), (">i2", (2,)),
                (">f4", (2,))],
    "offsets": [0, 12, 24, 36, 48, 56, 60], "itemsize": 68})
COMPRESSED_VERTEX = np.dtype({
    "names": ["position", "normal", "binormal", "tangent", "uv", "node0", "node1", "weight0"],
    "formats": [(">f4", (3,)), ">u4", ">u4", ">u4", (">i2", (2,)), "i1", "i1", ">u2"],
    "offsets": [0, 12, 16, 20, 24, 28, 29, 30], "itemsize": 32})
TRIANGLE = np.dtype((">u2", (3,)))
SHADER_REFERENCE = _dt(32, [("permutation", ">i2", 16)])


@dataclass
class Permutation:
    name: str
    flags: int
    lods: tuple[int, ...]  # geometry index per LOD, in LODS order (super high first); -1 = none
    markers: np.ndarray
    offset: int


@dataclass
class Region:
    name: str
    permutations: list[Permutation]
    offset: int


@dataclass
class Part:
    flags: int
    shader: int
    centroid: tuple
    local_nodes: np.ndarray | None  # gbxmodel: the part's local -> global node table (count entries)
    uncompressed: np.ndarray
    compressed: np.ndarray
    strip: np.ndarray  # flat u16 strip indices (the triangle records, 3 per record)
    offset: int
    where: str


@dataclass
class Geometry:
    flags: int
    parts: list[Part]
    offset: int


@dataclass
class ShaderReference:
    tag_class: bytes
    path: str
    permutation: int
    offset: int


@dataclass
class Marker:
    name: str
    magic: int
    instances: np.ndarray


@dataclass
class ModelTag:
    header: TagHeader
    flags: int = 0
    node_list_checksum: int = 0
    detail_cutoffs: tuple = (0.0,) * 5  # super high, high, medium, low, super low
    base_map_scale: tuple = (0.0, 0.0)
    markers: list[Marker] = field(default_factory=list)
    nodes: np.ndarray = field(default_factory=lambda: np.zeros(0, NODE))
    regions: list[Region] = field(default_factory=list)
    geometries: list[Geometry] = field(default_factory=list)
    shaders: list[ShaderReference] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    end: int = 0  # where the last child ended

    @property
    def tag_class(self) -> str:
        return self.header.tag_class.decode("latin-1")

    @property
    def gbx(self) -> bool:
        return self.header.tag_class == b"mod2"


def read_model_tag(data: bytes | memoryview, path: str) -> ModelTag:
    """Parse a model tag's every block. Structural problems raise `FormatError`; oddities are diagnostics."""
    header, notes = read_header(data, path, CLASSES)
    tag = ModelTag(header=header, diagnostics=notes)
    cur = TagCursor(data, path, HEADER_SIZE)
    at = cur.take(BODY_SIZE, "model body", "the model body")
    body = bytes(data[at : at + BODY_SIZE])
    flags, checksum, *cutoffs = BODY.unpack_from(body, 0)
    tag.flags, tag.node_list_checksum, tag.detail_cutoffs = flags, checksum, tuple(cutoffs)
    tag.base_map_scale = BASE_MAP_SCALE.unpack_from(body, 48)
    counts = {name: struct.unpack_from(">I", body, off)[0] for name, off in BLOCKS.items()}
    if flags & 2 and not tag.gbx:
        notes.append(Diagnostic("model body", at, "flag 'parts have local nodes' is set on an Xbox 'mode' tag, "
                                "which has no local node tables; ignored"))

    markers, _ = cur.array(counts["markers"], MARKER, "markers", "ModelMarker elements")
    for i, m in enumerate(markers):
        inst, _ = cur.array(int(m["instances"]), MARKER_INSTANCE, f"markers[{i}].instances",
                            "ModelMarkerInstance elements")
        tag.markers.append(Marker(tag_string(m["name"]), int(m["magic"]), inst))

    tag.nodes, _ = cur.array(counts["nodes"], NODE, "nodes", "ModelNode elements")

    regions, roff = cur.array(counts["regions"], REGION, "regions", "ModelRegion elements")
    perm_blocks = []
    for i, r in enumerate(regions):
        perms, poff = cur.array(int(r["permutations"]), PERMUTATION, f"regions[{i}].permutations",
                                "ModelRegionPermutation elements")
        perm_blocks.append((perms, poff))
        region = Region(tag_string(r["name"]), [], roff + i * REGION.itemsize)
        for j, p in enumerate(perms):
            pm, _ = cur.array(int(p["markers"]), PERMUTATION_MARKER, f"regions[{i}].permutations[{j}].markers",
                              "ModelRegionPermutationMarker elements")
            lods = tuple(int(x) for x in p["lods"][::-1])
            region.permutations.append(Permutation(tag_string(p["name"]), int(p["flags"]), lods, pm,
                                                   poff + j * PERMUTATION.itemsize))
        tag.regions.append(region)

    part_dt = GBX_PART if tag.gbx else PART
    part_name = "GBXModelGeometryPart" if tag.gbx else "ModelGeometryPart"
    geometries, goff = cur.array(counts["geometries"], GEOMETRY, "geometries", "ModelGeometry elements")
    for i, g in enumerate(geometries):
        parts, poff = cur.array(int(g["parts"]), part_dt, f"geometries[{i}].parts", f"{part_name} elements")
        geometry = Geometry(int(g["flags"]), [], goff + i * GEOMETRY.itemsize)
        for j, p in enumerate(parts):
            where = f"geometries[{i}].parts[{j}]"
            part_at = poff + j * part_dt.itemsize
            local = None
            if tag.gbx:
                n_local = int(p["local_node_count"])
                if n_local > MAX_LOCAL_NODES:
                    notes.append(Diagnostic(where, part_at + 107, f"local node count {n_local} is over "
                                            f"{MAX_LOCAL_NODES}; using the first {MAX_LOCAL_NODES}"))
                    n_local = MAX_LOCAL_NODES
                local = np.array(p["local_nodes"][:n_local], np.int32)
            unc, _ = cur.array(int(p["uncompressed"]), UNCOMPRESSED_VERTEX, f"{where}.uncompressed_vertices",
                               "ModelVertexUncompressed elements")
            comp, _ = cur.array(int(p["compressed"]), COMPRESSED_VERTEX, f"{where}.compressed_vertices",
                                "ModelVertexCompressed elements")
            tris, _ = cur.array(int(p["triangles"]), TRIANGLE, f"{where}.triangles", "ModelTriangle elements")
            geometry.parts.append(Part(int(p["flags"]), int(p["shader"]), tuple(float(x) for x in p["centroid"]),
                                       local, unc, comp, tris.reshape(-1), part_at, where))
        tag.geometries.append(geometry)

    shaders, soff = cur.array(counts["shaders"], SHADER_REFERENCE, "shaders", "ModelShaderReference elements")
    for i, s in enumerate(shaders):
        at = soff + i * SHADER_REFERENCE.itemsize
        cls, length = dependency(data, at)
        p = cur.dependency_path(length, f"shaders[{i}].shader", notes)
        tag.shaders.append(ShaderReference(cls, p, int(s["permutation"]), at))

    tag.end = cur.pos
    if cur.remaining:
        notes.append(Diagnostic("end of tag", cur.pos, f"{cur.remaining} bytes after the last block are ignored"))
    return tag
