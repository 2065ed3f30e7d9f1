"""MTLS: materials and their layers, whose layout changes with the file version.

800: material 12 B + layers of 28 B. 900/1000: material adds an 80-byte shader name; layers add
emissiveGain (900+) and fresnel colour/opacity/team colour (1000+; for 900 see
rules.FRESNEL_IN_V900). 1100+: no shader name; layers add shaderTypeId and a list of
(textureId, slot, optional KMTF) texture slots.
"""

from __future__ import annotations

import struct

from renderer import rules
from renderer.model import Layer, Material, TextureSlot

from .binary import Reader, append_sized, encode_fixed, fixed_string
from .tracks import read_track, read_tracks, write_track

U32 = struct.Struct("<I")
MATERIAL_HEAD = struct.Struct("<iI")
LAYER_BASE = struct.Struct("<IIiiIf")
FRESNEL = struct.Struct("<5f")
LAYER_TRACKS = frozenset({"KMTF", "KMTA", "KMTE", "KFC3", "KFCA", "KFTC"})


def read_material(r: Reader, version: int) -> Material:
    mr = r.inclusive("material")
    mat = Material()
    mat.priority_plane, mat.flags = mr.unpack(MATERIAL_HEAD, "material priority plane and flags")
    if 900 <= version <= 1000:
        mat.shader = fixed_string(mr.raw(80, "material shader name"))
    mr.expect_tag("LAYS")
    n = mr.count("layer", 28)
    for i in range(n):
        mr.where = f"{r.where} layer {i}"
        mat.layers.append(read_layer(mr, version))
    mr.where = r.where
    mat.extra = mr.rest()
    return mat


def read_layer(r: Reader, version: int) -> Layer:
    lr = r.inclusive("layer", 4 + LAYER_BASE.size)
    layer = Layer()
    (layer.filter_mode, layer.shading_flags, layer.texture_id, layer.texture_animation_id,
     layer.coord_id, layer.alpha) = lr.unpack(LAYER_BASE, "layer fields")
    if version > 800:
        layer.emissive_gain = lr.unpack(struct.Struct("<f"), "layer emissive gain")[0]
        if _has_fresnel(lr, version):
            v = lr.unpack(FRESNEL, "layer fresnel fields")
            layer.fresnel_color, layer.fresnel_opacity, layer.fresnel_team_color = v[:3], v[3], v[4]
            layer.has_fresnel = True
    if version >= 1100:
        layer.shader_type_id = lr.u32("layer shader type")
        n = lr.count("layer texture", 8)
        for _ in range(n):
            tid, slot = lr.u32("slot texture id"), lr.u32("slot index")
            track = read_track(lr) if lr.peek_tag() == "KMTF" else None
            layer.textures.append(TextureSlot(tid, slot, track))
    read_tracks(lr, LAYER_TRACKS, layer.tracks)
    layer.extra = lr.rest()
    return layer


def _has_fresnel(lr: Reader, version: int) -> bool:
    if version >= 1000:
        return True
    if rules.FRESNEL_IN_V900 == "auto":
        return lr.remaining >= FRESNEL.size and lr.peek_tag() not in LAYER_TRACKS
    return bool(rules.FRESNEL_IN_V900)


def write_material(mat: Material, version: int, out: list) -> None:
    body = [MATERIAL_HEAD.pack(mat.priority_plane, mat.flags)]
    if 900 <= version <= 1000:
        body.append(encode_fixed(mat.shader, 80, "material shader name"))
    body.append(b"LAYS" + U32.pack(len(mat.layers)))
    for layer in mat.layers:
        write_layer(layer, version, body)
    body.append(mat.extra)
    append_sized(out, body)


def write_layer(layer: Layer, version: int, out: list) -> None:
    body = [LAYER_BASE.pack(layer.filter_mode, layer.shading_flags, layer.texture_id,
                            layer.texture_animation_id, layer.coord_id, layer.alpha)]
    if version > 800:
        body.append(struct.pack("<f", layer.emissive_gain))
        if version >= 1000 or layer.has_fresnel:
            body.append(FRESNEL.pack(*layer.fresnel_color, layer.fresnel_opacity, layer.fresnel_team_color))
    if version >= 1100:
        body.append(struct.pack("<II", layer.shader_type_id, len(layer.textures)))
        for slot in layer.textures:
            body.append(struct.pack("<II", slot.texture_id, slot.slot))
            if slot.texture_track is not None:
                write_track(slot.texture_track, body)
    for t in layer.tracks.values():
        write_track(t, body)
    body.append(layer.extra)
    append_sized(out, body)


