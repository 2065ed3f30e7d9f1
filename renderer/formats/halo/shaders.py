"""Shader tags a model refers to: which bitmap is the base map, and how the layer blends.

Read (HEK tag files, big-endian; offsets are into the tag body after the 64-byte header; every
shader class starts with the 40-byte Shader struct: u16 flags at 0, bit2 'transparent lit'):

- `soso` shader_model v2 (440 bytes): u16 flags at 40 (bit1 two sided, bit2 not alpha tested);
  f32 map u/v scale at 156/160 (0 means 1); tag references base map at 164, multipurpose map at 188,
  detail map at 220, reflection cube map at 356. Children: those four paths, in that order.
- `schi` shader_transparent_chicago v1 (108 bytes): u8 flags at 41 (bit2 two sided), u16 first map
  type at 42, u16 framebuffer blend function at 44; tag reference lens flare at 56; blocks extra
  layers (16 each) at 72 and maps (220 each) at 84. Children: lens flare path, extra layers then
  their paths, maps then their paths. In a map: u16 flags at 0 (bit2 u clamped, bit3 v clamped),
  f32 u/v scale at 84/88 (0 means 1), u/v offset at 92/96, bitmap reference at 108.
- `sotr` shader_transparent_generic v1 (108 bytes): like `schi` up to its maps block at 84, whose
  elements are 100 bytes: u16 flags at 0 (bit1 u clamped, bit2 v clamped), f32 u/v scale at 4/8,
  u/v offset at 12/16, bitmap reference at 28.

Every other shader class, and any shader tag that is missing, unreadable or has no base map, gets a
flat colour (`flat_color`) and a diagnostic. A shader that could not be read (missing, unsupported
class, unreadable, bad) is unknown: it is drawn opaque and two-sided (filter mode 0, layer flag
TwoSided, `UNKNOWN_SHADER_FLAGS`; culling would hide faces the real shader may show), and its
diagnostic says so. A shader that was read keeps its own flags (two sided, alpha tested), also when
it has no base map.

Layer filter modes (renderer.rules.LAYER_FILTER_MODES):

| Halo | filter mode |
|---|---|
| shader_model, 'not alpha tested' set | 0 None (opaque) |
| shader_model, 'not alpha tested' clear (Halo alpha-tests the base map's alpha) | 1 Transparent (alpha test) |
| transparent blend 'alpha blend' | 2 Blend |
| 'multiply' | 5 Modulate |
| 'double multiply' | 6 Modulate2x |
| 'add' | 3 Additive |
| 'subtract' (no equivalent; darkens) | 5 Modulate |
| 'component min' (darkens) | 5 Modulate |
| 'component max' (brightens) | 3 Additive |
| 'alpha multiply add' | 4 AddAlpha |

Transparent shaders are unshaded (layer flag 0x1) unless the shader sets 'transparent lit'; a
'two sided' shader sets the layer flag TwoSided (0x10).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from renderer.errors import Diagnostic, FormatError

from .tagfile import EXTENSIONS, HEADER_SIZE, NO_TAG_ROOT, TagCursor, TagRoot, dependency, read_header, reflexive

BLEND_FUNCTIONS = ("alpha blend", "multiply", "double multiply", "add", "subtract", "component min",
                   "component max", "alpha multiply add")
BLEND_FILTER_MODES = (2, 5, 6, 3, 5, 5, 3, 4)
FIRST_MAP_TYPES = ("2d map", "reflection cube map", "object centered cube map", "viewer centered cube map")
FILTER_NONE, FILTER_TRANSPARENT = 0, 1
LAYER_UNSHADED, LAYER_TWO_SIDED = 0x1, 0x10
UNKNOWN_SHADER_FLAGS = LAYER_TWO_SIDED
UNKNOWN_SHADER_DRAWN = "drawn two-sided in its flat colour"

SHADER_MODEL_SIZE = 440
TRANSPARENT_SIZE = 108
SUPPORTED = {b"soso": 2, b"schi": 1, b"sotr": 1}


def flat_color(shader_path: str) -> tuple[int, int, int, int]:
    """The documented placeholder colour of a shader: from crc32 of its lower-case path, each channel 64..223.

    r, g, b = 64 + (crc >> 0, 8, 16 & 0xFF) * 160 // 256; alpha 255. Deterministic across runs and machines.
    """
    crc = zlib.crc32(shader_path.lower().encode("latin-1", "replace"))
    return (64 + (crc & 0xFF) * 160 // 256, 64 + ((crc >> 8) & 0xFF) * 160 // 256,
            64 + ((crc >> 16) & 0xFF) * 160 // 256, 255)


@dataclass
class ShaderInfo:
    """What the loader knows about one shader reference of a model."""

    tag_class: str
    path: str  # the tag path as the model stores it (no extension)
    file: str | None = None  # the shader tag file found under the tag root
    kind: str = ""  # shader_model, shader_transparent_chicago, ...
    base_map: str = ""  # bitmap tag path of the base/first map (no extension), "" when none
    filter_mode: int = FILTER_NONE
    blend: str = "opaque"
    shading_flags: int = UNKNOWN_SHADER_FLAGS  # until the tag is read
    map_scale: tuple = (1.0, 1.0)
    map_offset: tuple = (0.0, 0.0)
    wrap: tuple = (True, True)
    first_map_type: str = "2d map"
    resolved: bool = False  # the shader tag was read
    missing: str = ""  # why the shader tag was not found (as the asset search records it), "" when it was
    flat_color: tuple = (128, 128, 128, 255)
    notes: list[Diagnostic] = field(default_factory=list)

    def as_info(self) -> dict:
        return {
            "class": self.tag_class, "path": self.path, "file": self.file, "kind": self.kind,
            "resolved": self.resolved, "base_map": self.base_map, "blend": self.blend,
            "two_sided": bool(self.shading_flags & LAYER_TWO_SIDED),
            "filter_mode": self.filter_mode, "map_scale": list(self.map_scale), "map_offset": list(self.map_offset),
            "wrap": list(self.wrap), "first_map_type": self.first_map_type, "flat_color": list(self.flat_color),
            **({"missing": self.missing} if self.missing else {}),
        }


def _scale(v: float) -> float:
    return 1.0 if v == 0.0 or v != v else float(v)


def read_shader_model(data: bytes, path: str, info: ShaderInfo) -> None:
    read_header(data, path, {b"soso": SUPPORTED[b"soso"]})
    cur = TagCursor(data, path, HEADER_SIZE)
    at = cur.take(SHADER_MODEL_SIZE, "shader_model body", "the shader_model body")
    body = data[at : at + SHADER_MODEL_SIZE]
    flags = struct.unpack_from(">H", body, 40)[0]
    su, sv = struct.unpack_from(">2f", body, 156)
    info.kind = "shader_model"
    info.map_scale = (_scale(su), _scale(sv))
    info.shading_flags = LAYER_TWO_SIDED if flags & 2 else 0
    if flags & 4:
        info.filter_mode, info.blend = FILTER_NONE, "opaque"
    else:
        info.filter_mode, info.blend = FILTER_TRANSPARENT, "alpha tested"
    notes: list[Diagnostic] = []
    paths = []
    for name, off in (("base map", 164), ("multipurpose map", 188), ("detail map", 220), ("reflection cube map", 356)):
        _cls, length = dependency(body, off)
        paths.append(cur.dependency_path(length, f"shader_model {name}", notes))
    info.base_map = paths[0]
    info.notes.extend(notes)


def read_shader_transparent(data: bytes, path: str, info: ShaderInfo, cls: bytes) -> None:
    read_header(data, path, {cls: SUPPORTED[cls]})
    chicago = cls == b"schi"
    info.kind = "shader_transparent_chicago" if chicago else "shader_transparent_generic"
    cur = TagCursor(data, path, HEADER_SIZE)
    at = cur.take(TRANSPARENT_SIZE, f"{info.kind} body", f"the {info.kind} body")
    body = data[at : at + TRANSPARENT_SIZE]
    shader_flags = struct.unpack_from(">H", body, 0)[0]
    flags = body[41]
    first_map_type, blend = struct.unpack_from(">HH", body, 42)
    info.first_map_type = FIRST_MAP_TYPES[first_map_type] if first_map_type < 4 else f"unknown({first_map_type})"
    if blend < len(BLEND_FUNCTIONS):
        info.blend, info.filter_mode = BLEND_FUNCTIONS[blend], BLEND_FILTER_MODES[blend]
    else:
        info.blend, info.filter_mode = f"unknown({blend})", 2
        info.notes.append(Diagnostic(f"{info.kind} body", at + 44,
                                     f"unknown framebuffer blend function {blend}; drawn as alpha blend"))
    info.shading_flags = (LAYER_TWO_SIDED if flags & 4 else 0) | (0 if shader_flags & 4 else LAYER_UNSHADED)
    _cls, lens_len = dependency(body, 56)
    cur.dependency_path(lens_len, "lens flare", info.notes)
    n_extra, n_maps = reflexive(body, 72), reflexive(body, 84)
    map_size, dep_at = (220, 108) if chicago else (100, 28)
    extra_at = cur.take(n_extra * 16, "extra layers", f"{n_extra} extra layers")
    for i in range(n_extra):
        _cls, length = dependency(data, extra_at + 16 * i)
        cur.dependency_path(length, f"extra layers[{i}].shader", info.notes)
    maps_at = cur.take(n_maps * map_size, "maps", f"{n_maps} maps of {map_size} bytes")
    for i in range(n_maps):
        m = maps_at + map_size * i
        _cls, length = dependency(data, m + dep_at)
        p = cur.dependency_path(length, f"maps[{i}].map", info.notes)
        if i == 0:
            mflags = struct.unpack_from(">H", data, m)[0]
            scale_at = m + (84 if chicago else 4)
            su, sv, ou, ov = struct.unpack_from(">4f", data, scale_at)
            info.base_map = p
            info.map_scale = (_scale(su), _scale(sv))
            info.map_offset = (float(ou) if ou == ou else 0.0, float(ov) if ov == ov else 0.0)
            u_clamp, v_clamp = (4, 8) if chicago else (2, 4)
            info.wrap = (not mflags & u_clamp, not mflags & v_clamp)


def resolve_shader(root: TagRoot | None, cls: bytes, tag_path: str, where: str) -> ShaderInfo:
    """Follow one shader reference. Never raises: problems become `info.notes` and a flat colour."""
    info = ShaderInfo(cls.decode("latin-1"), tag_path, flat_color=flat_color(tag_path))
    ext = EXTENSIONS.get(cls)
    info.kind = ext[1:] if ext else f"unknown class {info.tag_class!r}"
    if root is None:
        info.missing = NO_TAG_ROOT
        info.notes.append(Diagnostic(where, None, f"shader {tag_path!r}: no tag root (no folder named 'tags' above "
                                     f"the model and no tag_root option); {UNKNOWN_SHADER_DRAWN}"))
        return info
    if cls not in SUPPORTED:
        info.notes.append(Diagnostic(where, None, f"shader {tag_path!r} is a {info.kind} ({info.tag_class!r}), which "
                                     f"is not read; {UNKNOWN_SHADER_DRAWN}"))
        return info
    found, why = root.find(tag_path, ext)
    if found is None:
        info.missing = root.missing_why(tag_path, ext)
        info.notes.append(Diagnostic(where, None, f"shader {why}; {UNKNOWN_SHADER_DRAWN}"))
        return info
    info.file = found.where
    try:
        if cls == b"soso":
            read_shader_model(found.data, found.where, info)
        else:
            read_shader_transparent(found.data, found.where, info, cls)
    except FormatError as e:
        clean = ShaderInfo(info.tag_class, tag_path, file=info.file, kind=info.kind, flat_color=info.flat_color)
        clean.notes.append(Diagnostic(where, None, f"shader tag is bad ({e}); {UNKNOWN_SHADER_DRAWN}"))
        return clean
    info.resolved = True
    return info
