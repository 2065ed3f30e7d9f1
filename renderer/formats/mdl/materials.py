"""Materials, their layers, and texture animations.

    Materials 1 {
        Material {
            ConstantColor, TwoSided, SortPrimsNearZ, SortPrimsFarZ, FullResolution,
            PriorityPlane 0,
            Shader "Shader_HD_DefaultUnit",        (900 and 1000)
            Layer {
                FilterMode Blend,                  (None Transparent Blend Additive AddAlpha Modulate Modulate2x)
                Unshaded, SphereEnvMap, TwoSided, Unfogged, NoDepthTest, NoDepthSet, Unlit,
                static TextureID 0,                or  TextureID 2 { DontInterp, 0: 0, 500: 1, }
                TVertexAnimId 0, CoordId 0,
                static Alpha 0.5,                  or an Alpha track (KMTA)
                static EmissiveGain 1,             (900+; KMTE)
                static FresnelColor { 1, 1, 1 }, static FresnelOpacity 0, static FresnelTeamColor 0,
                                                   (1000+, and 900 layers that carry them; KFC3 KFCA KFTC)
                Shader "Shader_HD_DefaultUnit",    (1100+: shaderTypeId 1; other ids: ShaderTypeId n)
                static TextureID 3 <= 0,           (1100+ texture slots: texture 3 in slot 0, HiveWE style)
                TextureID 3 <= 1 2 { DontInterp, 0: 3, 100: 4, }
                                                   (a slot whose texture id is animated: KMTF on the slot;
                                                    static id 3, slot 1, then the track's key count and keys)
            }
        }
    }
    TextureAnims 1 { TVertexAnim { Translation .., Rotation .., Scaling .. } }

A 900/1000 text that folds an HD material into one layer with `<=` slots (as HiveWE writes it)
loads as one layer per slot, which is how those versions store it in MDX.
"""

from __future__ import annotations

import dataclasses

from renderer.model import Layer, Material, TextureAnimation, TextureSlot

from .fields import Field, RecordState, Spec, read_named, write_record
from .header import read_container
from .text import Out
from .tokens import Parser, is_number
from .tracks import read_track, write_track

HD_SHADER = "Shader_HD_DefaultUnit"
FRESNEL_NAMES = frozenset({"FresnelColor", "FresnelOpacity", "FresnelTeamColor"})


def _fresnel(layer: Layer, version: int) -> bool:
    return version >= 1000 or layer.has_fresnel


def _read_texture_id(p: Parser, layer: Layer, st: RecordState, static: bool) -> None:
    if not static and is_number(p.peek()) and p.peek(1) == "{":
        if "KMTF" in layer.tracks:
            raise p.error("TextureID is animated twice", p.i - 1)
        layer.tracks["KMTF"] = read_track(p, "KMTF", "TextureID")
        return
    if p.peek(1) == "<=":
        tid = p.u32("a texture id")
        p.i += 1
        slot = p.u32("a texture slot")
        track = None
        if not static and is_number(p.peek()) and p.peek(1) == "{":
            track = read_track(p, "KMTF", f"TextureID {tid} <= {slot}")
        layer.textures.append(TextureSlot(tid, slot, track))
        return
    layer.texture_id = p.i32("a texture id")
    st.seen.add("TextureID=")


def _read_shader(p: Parser, layer: Layer, st: RecordState, static: bool) -> None:
    at = p.i
    s = p.string("a quoted shader name")
    if st.version >= 1100:
        if s == HD_SHADER:
            layer.shader_type_id = 1
        elif s == "":
            layer.shader_type_id = 0
        else:
            layer.shader_type_id = 0
            p.diag(f"layer shader {s!r} is not known; use ShaderTypeId <n> for shader type ids other than "
                   f"0 (SD) and 1 ({HD_SHADER})", at)
    else:
        st.extra["shader"] = s  # the material's shader in 900/1000: picked up by the material


def _read_shader_type(p: Parser, layer: Layer, st: RecordState, static: bool) -> None:
    layer.shader_type_id = p.u32("a shader type id")


def _write_layer_extra(layer: Layer, version: int, out: Out, items: list) -> None:
    if version >= 1100 and layer.shader_type_id == 1:
        items.append((None, f'Shader "{HD_SHADER}",'))
    elif layer.shader_type_id != 0:
        items.append((None, f"ShaderTypeId {int(layer.shader_type_id)},"))
    for s in layer.textures:
        if s.texture_track is None:
            items.append((None, f"static TextureID {int(s.texture_id)} <= {int(s.slot)},"))
        else:
            name = f"TextureID {int(s.texture_id)} <= {int(s.slot)}"
            items.append((None, lambda o, name=name, t=s.texture_track: write_track(o, name, t)))


LAYER = Spec(
    "Layer", Layer,
    (
        Field("FilterMode", "filter_mode", "filter"),
        Field("TextureID", "texture_id", "i32", "KMTF", omit_default=True, force=lambda la: not la.textures),
        Field("TVertexAnimId", "texture_animation_id", "i32", omit_default=True),
        Field("CoordId", "coord_id", "u32", omit_default=True),
        Field("Alpha", "alpha", "f", "KMTA", omit_default=True),
        Field("EmissiveGain", "emissive_gain", "f", "KMTE", min_version=900),
        Field("FresnelColor", "fresnel_color", "vec3", "KFC3", when=_fresnel),
        Field("FresnelOpacity", "fresnel_opacity", "f", "KFCA", when=_fresnel),
        Field("FresnelTeamColor", "fresnel_team_color", "f", "KFTC", when=_fresnel),
    ),
    flags_attr="shading_flags",
    flag_words=(("Unshaded", 0x1), ("SphereEnvMap", 0x2), ("TwoSided", 0x10), ("Unfogged", 0x20),
                ("NoDepthTest", 0x40), ("NoDepthSet", 0x80), ("Unlit", 0x100)),
    custom_read={"TextureID": _read_texture_id, "Shader": _read_shader, "ShaderTypeId": _read_shader_type},
    custom_write=_write_layer_extra,
    flags_after=("FilterMode",),
    named=False, label="layer",
)


def _read_layer(p: Parser, mat: Material, st: RecordState, static: bool) -> None:
    version = st.version
    layer, lst = read_named(p, LAYER, version, len(mat.layers))
    shader = lst.extra.get("shader")
    if shader is not None:
        mat.shader = shader
    layer.has_fresnel = version >= 1000 or bool(FRESNEL_NAMES & lst.seen)
    if version < 1100 and layer.textures:
        # 900/1000 store an HD material as one single-texture layer per slot, in slot order.
        for s in layer.textures:
            tracks = {k: v for k, v in layer.tracks.items() if k != "KMTF"}
            if s.texture_track is not None:
                tracks = {"KMTF": s.texture_track, **tracks}
            elif "KMTF" in layer.tracks:
                tracks = dict(layer.tracks)
            tid = s.texture_id - (1 << 32) if s.texture_id >= 1 << 31 else s.texture_id
            mat.layers.append(dataclasses.replace(layer, texture_id=tid, textures=[], tracks=tracks))
        return
    mat.layers.append(layer)


def _write_layers(mat: Material, version: int, out: Out, items: list) -> None:
    for i, layer in enumerate(mat.layers):
        items.append((None, lambda o, layer=layer, i=i: write_record(o, LAYER, layer, version, f"layer {i}")))


MATERIAL = Spec(
    "Material", Material,
    (
        Field("PriorityPlane", "priority_plane", "i32", omit_default=True),
        Field("Shader", "shader", "str", omit_default=True, min_version=900, max_version=1000, size=80),
    ),
    flag_words=(("ConstantColor", 0x1), ("TwoSided", 0x2), ("SortPrimsNearZ", 0x8), ("SortPrimsFarZ", 0x10),
                ("FullResolution", 0x20)),
    custom_read={"Layer": _read_layer},
    custom_write=_write_layers,
    named=False, label="material",
)

TEXTURE_ANIMATION = Spec(
    "TVertexAnim", TextureAnimation,
    (Field("Translation", None, "track", "KTAT"), Field("Rotation", None, "track", "KTAR"),
     Field("Scaling", None, "track", "KTAS")),
    flags_attr=None, named=False, label="texture animation",
)


def read_materials(p: Parser, model) -> None:
    model.materials += read_container(
        p, "Materials", "Material", lambda i: read_named(p, MATERIAL, model.version, i)[0])


def read_texture_animations(p: Parser, model) -> None:
    model.texture_animations += read_container(
        p, "TextureAnims", "TVertexAnim", lambda i: read_named(p, TEXTURE_ANIMATION, model.version, i)[0])


def write_materials(out: Out, model) -> None:
    if model.materials:
        out.open(f"Materials {len(model.materials)}")
        for i, m in enumerate(model.materials):
            write_record(out, MATERIAL, m, model.version, f"material {i}")
        out.close()
    if model.texture_animations:
        out.open(f"TextureAnims {len(model.texture_animations)}")
        for i, t in enumerate(model.texture_animations):
            write_record(out, TEXTURE_ANIMATION, t, model.version, f"texture animation {i}")
        out.close()
