"""Reforged HD materials: which materials / layers are HD and the texture of each of their six slots
in a frame (`renderer.rules.HD_SLOTS`; the shading is in renderer/gl/model_program.py)."""

from __future__ import annotations

import numpy as np

from renderer.model import Material, Model
from renderer.rules import HD_SLOTS

HD_SHADER = "Shader_HD_DefaultUnit"
NO_TEXTURE = -1


def is_hd_material(mat: Material) -> bool:
    """A 900 / 1000 HD material: its layers are the slots."""
    return str(mat.shader) == HD_SHADER


def is_hd_layer(model: Model, mat: Material, layer_index: int) -> bool:
    if is_hd_material(mat):
        return True
    return model.version >= 1100 and mat.layers[layer_index].shader_type_id == 1


def is_hd(model: Model, mat: Material) -> bool:
    return is_hd_material(mat) or (model.version >= 1100 and any(ly.shader_type_id == 1 for ly in mat.layers))


def drawn_layers(model: Model, mat: Material) -> range:
    """The layers drawn as passes: one for a 900 / 1000 HD material, all of them otherwise."""
    return range(min(1, len(mat.layers)) if is_hd_material(mat) else len(mat.layers))


def slot_textures(model: Model, pose, material_id: int, layer_index: int) -> list[int]:
    """The (animated) texture id of each HD slot of one drawn layer; NO_TEXTURE where none."""
    out = [NO_TEXTURE] * len(HD_SLOTS)
    mat = model.materials[material_id]
    if is_hd_material(mat):
        for k in range(min(len(mat.layers), len(HD_SLOTS))):
            out[k] = int(pose.layer_texture_id[pose.layer_index[(material_id, k)]])
        return out
    flat = pose.layer_index[(material_id, layer_index)]
    slots = np.flatnonzero(pose.slot_layer == flat)
    for s in slots:
        kind = int(pose.slot_kind[s])
        if 0 <= kind < len(HD_SLOTS) and out[kind] == NO_TEXTURE:
            out[kind] = int(pose.slot_texture_id[s])
    if out[0] == NO_TEXTURE:
        out[0] = int(pose.layer_texture_id[flat])
    return out


def static_slot_textures(model: Model, material_id: int, layer_index: int) -> list[int]:
    """Like `slot_textures`, from the records' static texture ids (no pose): what `farm inspect` shows."""
    out = [NO_TEXTURE] * len(HD_SLOTS)
    mat = model.materials[material_id]
    if is_hd_material(mat):
        for k in range(min(len(mat.layers), len(HD_SLOTS))):
            out[k] = int(mat.layers[k].texture_id)
        return out
    layer = mat.layers[layer_index]
    for s in layer.textures:
        if 0 <= s.slot < len(HD_SLOTS) and out[s.slot] == NO_TEXTURE:
            out[s.slot] = int(s.texture_id)
    if out[0] == NO_TEXTURE:
        out[0] = int(layer.texture_id)
    return out


def hd_slot_table(model: Model, material_id: int) -> list[dict]:
    """Per HD layer drawn of a material: {"layer": index, slot name: texture id or None, ...}."""
    mat = model.materials[material_id]
    rows = []
    for li in drawn_layers(model, mat):
        if not is_hd_layer(model, mat, li):
            continue
        ids = static_slot_textures(model, material_id, li)
        rows.append({"layer": li, **{slot: (None if t == NO_TEXTURE else t) for slot, t in zip(HD_SLOTS, ids,
                                                                                             strict=True)}})
    return rows
