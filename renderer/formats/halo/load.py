"""Build the neutral Model from a Halo model tag: choose LOD, regions and permutations, map the rest.

See the package docstring (renderer/formats/halo/__init__.py) for the mapping and its decisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath

import numpy as np

from renderer.assets.cache import DECODED
from renderer.assets.search import split_source
from renderer.errors import Diagnostic, FormatError
from renderer.model import Bone, Extent, Geoset, Layer, Material, Model, Texture

from . import geometry as G
from .bitmap import decode_bitmap_tag, read_bitmap_tag
from .model_tag import LODS, MODEL_FLAGS, PART_FLAGS, PERMUTATION_FLAGS, ModelTag, Part, read_model_tag
from .shaders import UNKNOWN_SHADER_DRAWN, UNKNOWN_SHADER_FLAGS, ShaderInfo, flat_color, resolve_shader
from .tagfile import EXTENSIONS, TagRoot, find_tag_root, tag_string

BONE_FLAG = 0x100  # the MDX node-type bit for bones
TEXTURE_WRAP_WIDTH, TEXTURE_WRAP_HEIGHT = 1, 2
MISSING_SHADER = "<missing shader>"
# The asset search's kinds for Halo tags, and what a frame draws when one is missing (the sentence's
# end in renderer.texture_set; the farm's CLI names --tag-root for these kinds).
MISSING_DRAWN = {"halo shader": UNKNOWN_SHADER_DRAWN, "halo bitmap": "drawn in the shader's flat colour"}
TAG_KINDS = tuple(MISSING_DRAWN)


def _flag_names(value: int, names: tuple[str, ...]) -> list[str]:
    out = [n for i, n in enumerate(names) if value & (1 << i)]
    rest = value & ~((1 << len(names)) - 1)
    if rest:
        out.append(f"0x{rest:x}")
    return out


def lod_index(lod) -> int:
    """0 (super high) .. 4 (super low) from a name ('super_high', 'super high', 'SUPER-HIGH') or an index."""
    if isinstance(lod, (int, np.integer)) and not isinstance(lod, bool):
        if 0 <= int(lod) < len(LODS):
            return int(lod)
        raise ValueError(f"LOD index {lod} is outside 0..{len(LODS) - 1} (0 = super_high)")
    if isinstance(lod, str):
        key = lod.strip().lower().replace(" ", "_").replace("-", "_")
        if key in LODS:
            return LODS.index(key)
        if key.isdigit():
            return lod_index(int(key))
    raise ValueError(f"unknown LOD {lod!r}; choose one of {', '.join(LODS)} or an index 0..4")


NEAREST_TAG_ROOT = "nearest"  # read_halo_model's default tag root: the folder named 'tags' above the model


def read_halo_model(data: bytes, path: str = "<bytes>", *, strict: bool = False, lod="super_high", permutation=None,
                    regions=None, tag_root=NEAREST_TAG_ROOT, resolver=None) -> Model:
    """The neutral Model of a Halo 1 model tag (renderer.formats' reader contract): `load_halo_model`'s
    model, without the bitmaps it found (a caller that draws it reads it with renderer.formats.read)."""
    return load_halo_model(data, path, strict=strict, lod=lod, permutation=permutation, regions=regions,
                           tag_root=tag_root, resolver=resolver)[0]


def load_halo_model(data: bytes, path: str = "<bytes>", *, strict: bool = False, lod="super_high", permutation=None,
                    regions=None, tag_root=NEAREST_TAG_ROOT, resolver=None) -> tuple[Model, HaloBitmaps]:
    """Parse the bytes of a Halo 1 `.model` (Xbox, class mode) or `.gbxmodel` (PC, class mod2) tag
    into the neutral Model and the texture source that draws its textures from the bitmap tags found
    while it loaded (`HaloBitmaps`: renderer.context.ModelContext.texture_source; renderer.formats'
    loader contract).

    lod: 'super_high' (default), 'high', 'medium', 'low', 'super_low' or 0..4.
    permutation: None (permutation 0 of every region), an index or a name (applied to every region
    that has it), or a mapping {region name or index: permutation name or index}.
    regions: None (all) or a name, an index or a list of them: only these regions are drawn.
    strict: every diagnostic becomes a FormatError.
    The shader and bitmap tags it names are found by `resolver`
    (a `TagRoot`, or what a worker was given instead: renderer.assets.pins); without one, by a
    `TagRoot` over `tag_root`: by default the folder named 'tags' above `path` (a file's), None for
    none (flat colours; nothing but `data` is read)."""
    lod_i = lod_index(lod)
    tag = read_model_tag(data, path)
    if resolver is None:
        if tag_root == NEAREST_TAG_ROOT:
            tag_root = find_tag_root(path) if split_source(path) is None else None
        resolver = TagRoot(Path(tag_root)) if tag_root is not None else None
    model = Model(version=tag.header.version, path=path, format="halo")
    model.name = PurePosixPath(path.replace("\\", "/")).stem
    model.diagnostics.extend(tag.diagnostics)
    b = _Builder(tag, model, path, resolver)
    with np.errstate(all="ignore"):  # non-finite input is replaced and reported, never warned about
        b.nodes()
        b.shaders()
        choices = b.select(lod_i, permutation, regions)
        b.geosets(choices, lod_i)
        b.finish(lod_i)
    if strict and model.diagnostics:
        d = model.diagnostics[0]
        raise FormatError(path, d.where, d.offset, f"{d.message} (strict mode)")
    return model, HaloBitmaps(resolver)


class _Builder:
    def __init__(self, tag: ModelTag, model: Model, path: str, root: TagRoot | None):
        self.tag, self.model, self.path, self.root = tag, model, path, root
        self.node_info: list[dict] = []
        self.shader_infos: list[ShaderInfo] = []
        self.texture_info: list[dict] = []
        self.material_of_shader: list[int] = []
        self.fallback_material: int | None = None
        self.selected: list[dict] = []
        self.region_info: list[dict] = []
        self._triangles: dict[tuple[int, int], tuple[np.ndarray, int]] = {}

    def diag(self, where: str, offset: int | None, message: str) -> None:
        self.model.diagnostics.append(Diagnostic(where, offset, message))

    # -- nodes ---------------------------------------------------------------------------------
    def nodes(self) -> None:
        nodes = self.tag.nodes
        n = len(nodes)
        parents = [int(p) for p in nodes["parent"]]
        t = np.asarray(nodes["translation"], np.float64).reshape(n, 3)
        q = np.asarray(nodes["rotation"], np.float64).reshape(n, 4)
        bad = ~(np.isfinite(t).all(axis=1) & np.isfinite(q).all(axis=1) & (np.abs(t) < 1e18).all(axis=1))
        if bad.any():
            self.diag("nodes", None, f"nodes {np.flatnonzero(bad).tolist()} have non-finite or huge default "
                      "transforms; they use the identity")
            t[bad], q[bad] = 0.0, (0.0, 0.0, 0.0, 1.0)
        local = G.local_matrices(t, q)
        world, problems = G.world_matrices(local, parents)
        for p in problems:
            self.diag("nodes", None, p)
        self.world = world
        self.model.pivots = world[:, :3, 3].astype(np.float32).reshape(n, 3)
        for i, node in enumerate(nodes):
            name = node["name"].split(b"\0", 1)[0].decode("latin-1")
            self.model.bones.append(Bone(name=name, object_id=i, parent_id=parents[i], flags=BONE_FLAG))
            self.node_info.append({
                "index": i, "name": name, "parent": parents[i], "first_child": int(node["first_child"]),
                "next_sibling": int(node["next_sibling"]),
                "translation": [float(x) for x in node["translation"]],
                "rotation": [float(x) for x in node["rotation"]],
                "distance_from_parent": float(node["distance"]),
                "world": [[float(x) for x in row] for row in world[i]],
            })

    # -- shaders, materials, textures -----------------------------------------------------------
    def shaders(self) -> None:
        by_bitmap: dict[str, int] = {}
        for i, ref in enumerate(self.tag.shaders):
            where = f"shaders[{i}]"
            info = resolve_shader(self.root, ref.tag_class, ref.path, where)
            self.model.diagnostics.extend(info.notes)
            self.shader_infos.append(info)
            tex_id, missing = None, {}
            if info.resolved and info.base_map:
                key = info.base_map.lower()
                if key in by_bitmap:
                    tex_id = by_bitmap[key]
                else:
                    tex_id, missing = self._bitmap_texture(info, where)
                    if tex_id is not None:
                        by_bitmap[key] = tex_id
            elif info.resolved:
                self.diag(where, None, f"shader {ref.path!r} has no base map; drawn in its flat colour")
            if tex_id is None:
                tex_id = self._flat_texture(info.flat_color, i, **missing)
            self.material_of_shader.append(len(self.model.materials))
            self.model.materials.append(Material(
                shader=ref.path + EXTENSIONS.get(ref.tag_class, ""),
                layers=[Layer(filter_mode=info.filter_mode, shading_flags=info.shading_flags, texture_id=tex_id)],
            ))

    def _bitmap_texture(self, info: ShaderInfo, where: str) -> tuple[int | None, dict]:
        """(texture index, {}) of the shader's base map, or (None, {bitmap, missing} when the
        bitmap tag was not found, else {})."""
        found, why = self.root.find(info.base_map, ".bitmap")
        if found is None:
            self.diag(where, None, f"base map {why}; drawn in the shader's flat colour")
            missing = self.root.missing_why(info.base_map, ".bitmap")
            return None, {"bitmap": info.base_map + ".bitmap", "missing": missing}
        try:
            bt = read_bitmap_tag(found.data, found.where)
            if not bt.entries:
                raise FormatError(found.where, "bitmap data", None, "the bitmap tag holds no bitmaps")
        except FormatError as e:
            self.diag(where, None, f"base map is bad ({e}); drawn in the shader's flat colour")
            return None, {}
        e0 = bt.entries[0]
        flags = (TEXTURE_WRAP_WIDTH if info.wrap[0] else 0) | (TEXTURE_WRAP_HEIGHT if info.wrap[1] else 0)
        self.model.textures.append(Texture(replaceable_id=0, path=info.base_map + ".bitmap", flags=flags))
        self.texture_info.append({
            "index": len(self.texture_info), "path": info.base_map + ".bitmap", "file": found.where,
            "flat_color": None, "width": e0.width, "height": e0.height, "format": e0.format, "type": e0.type,
            "bitmaps": len(bt.entries),
        })
        return len(self.model.textures) - 1, {}

    def _flat_texture(self, color: tuple, shader: int | None, bitmap: str = "", missing: str = "") -> int:
        """A flat-colour texture; `bitmap` and `missing` name the base map it stands for when that
        bitmap tag was not found (and why), for the asset search's record."""
        self.model.textures.append(Texture(replaceable_id=0, path="", flags=TEXTURE_WRAP_WIDTH | TEXTURE_WRAP_HEIGHT))
        self.texture_info.append({"index": len(self.texture_info), "path": "", "file": None,
                                  "flat_color": list(color), "shader": shader,
                                  **({"bitmap": bitmap, "missing": missing} if bitmap else {})})
        return len(self.model.textures) - 1

    def _material_for(self, part: Part) -> int:
        if 0 <= part.shader < len(self.material_of_shader):
            return self.material_of_shader[part.shader]
        self.diag(part.where, part.offset + 4, f"shader index {part.shader} is outside 0..{len(self.tag.shaders) - 1}; "
                  f"drawn with the fallback material, two-sided, in {flat_color(MISSING_SHADER)}")
        if self.fallback_material is None:
            tex = self._flat_texture(flat_color(MISSING_SHADER), None)
            self.fallback_material = len(self.model.materials)
            self.model.materials.append(Material(shader=MISSING_SHADER, layers=[
                Layer(texture_id=tex, shading_flags=UNKNOWN_SHADER_FLAGS)]))
        return self.fallback_material

    # -- selection -------------------------------------------------------------------------------
    def _find(self, items: list, key, what: str, within: str) -> int:
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if 0 <= int(key) < len(items):
                return int(key)
            raise ValueError(f"{what} index {key} is outside 0..{len(items) - 1}{within}")
        if isinstance(key, str):
            names = [it.name.lower() for it in items]
            if key.lower() in names:
                return names.index(key.lower())
            if key.strip().isdigit():  # "2" from a command line: an index when no name matches
                return self._find(items, int(key), what, within)
        known = ", ".join(repr(it.name) for it in items)
        raise ValueError(f"no {what} {key!r}{within}; there are: {known}")

    def select(self, lod_i: int, permutation, regions) -> list[tuple[int, int, str]]:
        tag = self.tag
        if regions is None:
            wanted = list(range(len(tag.regions)))
        else:
            if isinstance(regions, str):
                keys = [k.strip() for k in regions.split(",") if k.strip()]  # "head,torso" from a command line
            elif isinstance(regions, (int, np.integer)):
                keys = [regions]
            else:
                keys = list(regions)
            wanted = sorted({self._find(tag.regions, k, "region", "") for k in keys})
        chosen: dict[int, tuple[int, str]] = {}
        if isinstance(permutation, Mapping):
            for rk, pk in permutation.items():
                r = self._find(tag.regions, rk, "region", "")
                region = tag.regions[r]
                chosen[r] = (self._find(region.permutations, pk, "permutation", f" in region {region.name!r}"),
                             "requested")
        elif permutation is not None:
            hits = 0
            for r in wanted:
                try:
                    chosen[r] = (self._find(tag.regions[r].permutations, permutation, "permutation", ""), "requested")
                    hits += 1
                except ValueError:
                    pass
            if wanted and not hits:
                names = sorted({p.name for r in wanted for p in tag.regions[r].permutations})
                raise ValueError(f"no selected region has permutation {permutation!r}; permutations: {names}")
        out = []
        for r, region in enumerate(tag.regions):
            pick, how = chosen.get(r, (0, "default"))
            entry = {
                "index": r, "name": region.name, "selected": r in wanted,
                "chosen": pick if (r in wanted and region.permutations) else None, "chosen_by": how,
                "permutations": [
                    {"index": j, "name": p.name, "flags": _flag_names(p.flags, PERMUTATION_FLAGS),
                     "lods": dict(zip(LODS, p.lods, strict=True)),
                     "markers": [{"name": tag_string(mk["name"]), "node": int(mk["node"]),
                                  "translation": [float(x) for x in mk["translation"]],
                                  "rotation": [float(x) for x in mk["rotation"]]} for mk in p.markers]}
                    for j, p in enumerate(region.permutations)
                ],
            }
            self.region_info.append(entry)
            if r in wanted and region.permutations:
                out.append((r, pick, how))
        return [self._lod(r, p, lod_i) for r, p, _ in out]

    def _lod(self, r: int, p: int, lod_i: int) -> tuple[int, int, str]:
        perm = self.tag.regions[r].permutations[p]
        order = [lod_i, *range(lod_i + 1, len(LODS)), *range(lod_i - 1, -1, -1)]
        n = len(self.tag.geometries)
        for i in order:
            g = perm.lods[i]
            if 0 <= g < n:
                return r, p, LODS[i]
            if g != -1:
                self.diag(f"regions[{r}].permutations[{p}]", perm.offset + 72 - 2 * i,
                          f"{LODS[i]} geometry index {g} is outside 0..{n - 1}; trying another LOD")
        self.diag(f"regions[{r}].permutations[{p}]", perm.offset + 64, "no LOD names a geometry; nothing drawn")
        return r, p, ""

    # -- geometry ----------------------------------------------------------------------------------
    def triangles(self, g: int, k: int) -> tuple[np.ndarray, int]:
        if (g, k) not in self._triangles:
            self._triangles[(g, k)] = G.strip_to_triangles(self.tag.geometries[g].parts[k].strip)
        return self._triangles[(g, k)]

    def geosets(self, choices: list[tuple[int, int, str]], lod_i: int) -> None:
        used: dict[int, tuple[int, int]] = {}
        base_scale = tuple(1.0 if s == 0.0 or s != s else float(s) for s in self.tag.base_map_scale)
        for r, p, lod_name in choices:
            entry = {"region": r, "region_name": self.tag.regions[r].name, "permutation": p,
                     "permutation_name": self.tag.regions[r].permutations[p].name, "lod": lod_name or None,
                     "geometry": None, "geosets": []}
            self.selected.append(entry)
            if not lod_name:
                continue
            g = self.tag.regions[r].permutations[p].lods[LODS.index(lod_name)]
            entry["geometry"] = g
            if g in used:
                entry["shared_with"] = list(used[g])
                continue
            used[g] = (r, p)
            for k, part in enumerate(self.tag.geometries[g].parts):
                gs = self._part(g, k, part, base_scale)
                if gs is None:
                    continue
                gs.selection_group = r
                gs.lod = LODS.index(lod_name)
                gs.lod_name = lod_name
                entry["geosets"].append(len(self.model.geosets))
                self.model.geosets.append(gs)

    def _part(self, g: int, k: int, part: Part, base_scale: tuple) -> Geoset | None:
        where = part.where
        if len(part.uncompressed):
            v = G.decode_uncompressed(part.uncompressed)
            if part.local_nodes is not None and self.tag.flags & 2:
                v["nodes"] = self._delocalize(v["nodes"], part)
        elif len(part.compressed):
            v = G.decode_compressed(part.compressed)
        else:
            if len(part.strip):
                self.diag(where, part.offset + 32, "part has triangles but no vertices; skipped")
            return None
        n = len(v["position"])
        if n > 0xFFFF:
            raise FormatError(self.path, where, part.offset + 32, f"{n} vertices is more than 16-bit indices reach")
        for key in ("position", "normal", "binormal", "tangent", "uv"):
            a = v[key]
            if not np.isfinite(a).all():
                self.diag(where, part.offset + 32, f"vertex {key} values that are not finite are set to 0")
                v[key] = np.where(np.isfinite(a), a, 0.0).astype(np.float32)
        positions = v["position"]
        normals = G.normalize(v["normal"])
        tris, _skipped = self.triangles(g, k)
        bad = (tris >= n).any(axis=1) if len(tris) else np.zeros(0, bool)
        if bad.any():
            self.diag(where, part.offset + 56, f"{int(bad.sum())} triangles name vertices past the {n} the part has; "
                      "dropped")
            tris = tris[~bad]
        gs = Geoset(vertices=np.ascontiguousarray(positions, np.float32), normals=normals)
        gs.faces = np.ascontiguousarray(tris.reshape(-1), np.uint16)
        gs.face_types = np.array([4], np.uint32)
        gs.face_counts = np.array([len(gs.faces)], np.uint32)
        gs.material_id = self._material_for(part)
        shader = self.shader_infos[part.shader] if 0 <= part.shader < len(self.shader_infos) else None
        uv = v["uv"] * np.array(base_scale, np.float32)
        if shader is not None and shader.resolved:
            uv = uv * np.array(shader.map_scale, np.float32) + np.array(shader.map_offset, np.float32)
        gs.uv_sets = [np.ascontiguousarray(uv, np.float32)]
        gs.tangents = _tangents(v["tangent"], v["binormal"], normals)
        gs.bone_indices, gs.bone_weights = self._skin(v["nodes"], v["weights"], where, part.offset)
        lo = positions.min(axis=0) if n else np.zeros(3)
        hi = positions.max(axis=0) if n else np.zeros(3)
        gs.extent = Extent(float(np.linalg.norm(hi - lo) / 2), tuple(float(x) for x in lo), tuple(float(x) for x in hi))
        return gs

    def _delocalize(self, nodes: np.ndarray, part: Part) -> np.ndarray:
        table = part.local_nodes
        out = nodes.copy()
        bad = (nodes >= len(table)) | (nodes < -1)
        if bad.any():
            self.diag(part.where, part.offset + 107, f"{int(bad.any(axis=1).sum())} vertices name local nodes outside "
                      f"0..{len(table) - 1}; they use node 0")
        ok = (nodes >= 0) & ~bad
        out[ok] = table[nodes[ok]]
        out[bad] = 0
        return out

    def _skin(self, nodes: np.ndarray, weights: np.ndarray, where: str, offset: int):
        n_nodes = len(self.tag.nodes)
        n = len(nodes)
        if n_nodes == 0:
            if n:
                self.diag(where, offset, "the model has no nodes; the part is drawn unskinned")
            return None, None
        nodes = nodes.copy()
        w = np.array(weights, np.float32)
        bad = (nodes >= n_nodes) | (nodes < -1)
        bad[:, 0] |= nodes[:, 0] == -1  # the first node must exist; the second may be -1 (none)
        if bad.any():
            self.diag(where, offset, f"{int(bad.any(axis=1).sum())} vertices name nodes outside 0..{n_nodes - 1}; "
                      "they use node 0")
            nodes[bad] = 0
        none = nodes == -1
        nodes[none] = 0
        w[none] = 0.0
        w = np.where(np.isfinite(w), np.maximum(w, 0.0), 0.0)
        total = w.sum(axis=1, keepdims=True)
        flat = total[:, 0] <= 0
        w = np.divide(w, total, out=np.zeros_like(w), where=total > 0)
        w[flat] = (1.0, 0.0)
        indices = np.zeros((n, 4), np.int32)
        indices[:, :2] = nodes
        bw = np.zeros((n, 4), np.float32)
        bw[:, :2] = w
        return indices, bw

    # -- model-level facts -------------------------------------------------------------------------
    def finish(self, lod_i: int) -> None:
        m, tag = self.model, self.tag
        if m.geosets:
            lo = np.min([g.extent.min for g in m.geosets], axis=0)
            hi = np.max([g.extent.max for g in m.geosets], axis=0)
            m.extent = Extent(float(np.linalg.norm(hi - lo) / 2), tuple(float(x) for x in lo),
                              tuple(float(x) for x in hi))
        geometries = []
        for gi, geo in enumerate(tag.geometries):
            parts = []
            for k, part in enumerate(geo.parts):
                tris, _ = self.triangles(gi, k)
                parts.append({
                    "index": k, "shader": part.shader, "flags": _flag_names(part.flags, PART_FLAGS),
                    "uncompressed_vertices": len(part.uncompressed), "compressed_vertices": len(part.compressed),
                    "strip_indices": len(part.strip), "triangles": len(tris),
                    "local_nodes": [int(x) for x in part.local_nodes] if part.local_nodes is not None else None,
                })
            geometries.append({"index": gi, "parts": parts})
        h = tag.header
        m.info = {
            "class": tag.tag_class, "version": h.version, "engine": h.engine.decode("latin-1"),
            "checksum": f"0x{h.checksum:08x}", "checksum_ok": h.checksum_ok,
            "flags": _flag_names(tag.flags, MODEL_FLAGS), "node_list_checksum": tag.node_list_checksum,
            "detail_cutoffs": dict(zip(LODS, (float(x) for x in tag.detail_cutoffs), strict=True)),
            "base_map_scale": [float(x) for x in tag.base_map_scale],
            "lod": LODS[lod_i],
            "nodes": self.node_info,
            "markers": [{"name": mk.name, "magic": mk.magic,
                         "instances": [{"region": int(i["region"]), "permutation": int(i["permutation"]),
                                        "node": int(i["node"]), "translation": [float(x) for x in i["translation"]],
                                        "rotation": [float(x) for x in i["rotation"]]} for i in mk.instances]}
                        for mk in tag.markers],
            "regions": self.region_info,
            "selected": self.selected,
            "geometries": geometries,
            "shaders": [dict(s.as_info(), index=i, permutation=tag.shaders[i].permutation,
                             material=self.material_of_shader[i])
                        for i, s in enumerate(self.shader_infos)],
            "textures": self.texture_info,
            "tag_root": self.root.label if self.root is not None else None,
        }


def _tangents(tangent: np.ndarray, binormal: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """(n, 4): unit tangent and the handedness w = sign(dot(cross(normal, tangent), binormal)) (+1 when 0)."""
    t = G.normalize(tangent)
    w = np.sign(np.einsum("ij,ij->i", np.cross(normal, t), binormal)).astype(np.float32)
    w[w == 0] = 1.0
    return np.concatenate([t, w[:, None]], axis=1).astype(np.float32)


# -- textures for the renderer ---------------------------------------------------------------------

class HaloBitmaps:
    """The texture source of a Halo model (renderer.context.ModelContext.texture_source): its textures
    are the bitmap tags the loader's resolver found (a `TagRoot`, or a worker's pinned answers; their
    bytes kept from the load, decoded through the digest cache), or flat colours. Records, in the
    renderer's asset search, each shader and bitmap tag the model uses: found ones (path and sha256),
    and missing ones (what was asked, why, and the tag root looked in) the way a missing texture is
    recorded, so frames warn about them and `missing = "fail"` fails them. `drawn` ends the warning:
    what the frame draws instead (renderer.texture_set)."""

    drawn = MISSING_DRAWN

    def __init__(self, resolver=None):
        self.resolver = resolver  # what the loader found the tags with; its `assets` hold their bytes
        self._recorded: set[int] = set()

    def _record_tags(self, model: Model, search) -> None:
        root = model.info.get("tag_root")
        for s in model.info.get("shaders", ()):
            if s.get("file"):
                self._found(search, "halo shader", s.get("path", ""), s["file"])
            elif s.get("missing"):  # a shader class that is not read is not missing: it is not looked up
                self._missing(search, "halo shader", s.get("path", ""), s["missing"], root)
        seen: set[str] = set()
        for t in model.info.get("textures", ()):
            if t.get("bitmap") and t.get("missing") and t["bitmap"].lower() not in seen:
                seen.add(t["bitmap"].lower())
                self._missing(search, "halo bitmap", t["bitmap"], t["missing"], root)

    @staticmethod
    def _missing(search, kind: str, asked: str, why: str, root: str | None) -> None:
        looked = [root] if root and not why.startswith("refused") else []
        search.note_missing(kind, asked, why, looked)

    def _found(self, search, kind: str, asked: str, where: str):
        """The Asset the loader found at `where` (recorded as found), or None (recorded as unreadable)."""
        assets = getattr(self.resolver, "assets", None) or {}
        asset = next((a for a in assets.values() if a.where == where), None)
        if asset is None:
            search.note_missing(kind, asked, "cannot be read: not among the tags the model was loaded with", [where])
            return None
        return search.note_found(kind, asked, where, asset.data)

    def image(self, model: Model, texture_index: int, search) -> np.ndarray | None:
        if id(search) not in self._recorded:
            self._recorded.add(id(search))
            self._record_tags(model, search)
        textures = model.info.get("textures") or []
        if not 0 <= texture_index < len(textures):
            return None
        t = textures[texture_index]
        if t.get("file") and t.get("path"):
            asset = self._found(search, "halo bitmap", t["path"], t["file"])
            if asset is not None:
                try:
                    return DECODED.get(asset.sha256, asset.data, t["file"], decode_bitmap_tag, "halo bitmap")
                except FormatError as e:
                    model.diagnostics.append(Diagnostic(f"textures[{texture_index}]", None,
                                                        f"base map {t['file']}: {e}; drawn in its flat colour"))
        color = t.get("flat_color") or list(flat_color(t.get("path", "")))
        return np.array(color, np.uint8).reshape(1, 1, 4)
