"""Fixed field layouts of MDX records, declared once and used for both reading and writing.

A layout is a list of (attribute, code). Codes: I u32, i i32, f f32, 2I/3f/3B/... small tuples,
9f three RGB triples, 6I two (start, end, repeat) intervals, ext an Extent (radius, min, max),
s80/s260 fixed NUL-padded strings.
"""

from __future__ import annotations

import struct

from renderer.model import Extent

from .binary import Reader, encode_fixed, fixed_string

_CODES = {
    "I": ("I", 1), "i": ("i", 1), "f": ("f", 1),
    "2I": ("2I", 2), "3I": ("3I", 3), "3f": ("3f", 3), "3B": ("3B", 3),
    "9f": ("9f", 9), "6I": ("6I", 6), "ext": ("7f", 7),
    "s80": ("80s", 1), "s260": ("260s", 1),
}


class Layout:
    __slots__ = ("fields", "struct", "size", "_assign")

    def __init__(self, fields: list[tuple[str, str]]):
        self.fields = fields
        self.struct = struct.Struct("<" + "".join(_CODES[c][0] for _, c in fields))
        self.size = self.struct.size
        self._assign = _compile_assign(fields)

    def read(self, r: Reader, obj, what: str) -> None:
        self._assign(obj, r.unpack(self.struct, what))

    def pack(self, obj) -> bytes:
        flat: list = []
        for name, code in self.fields:
            v = getattr(obj, name)
            if code[0] == "s":
                flat.append(encode_fixed(v, int(code[1:]), name))
            elif code == "ext":
                flat.append(v.radius)
                flat.extend(v.min)
                flat.extend(v.max)
            elif code in ("9f", "6I"):
                for part in v:
                    flat.extend(part)
            elif _CODES[code][1] == 1:
                flat.append(v)
            else:
                flat.extend(v)
        return self.struct.pack(*flat)


def _compile_assign(fields: list[tuple[str, str]]):
    """A function that sets every field of an object from the unpacked tuple, generated once per
    layout: reading records is the hot path, and a loop over field codes per record is not."""
    lines, i = [], 0
    for name, code in fields:
        n = _CODES[code][1]
        if code[0] == "s":
            expr = f"fixed_string(v[{i}])"
        elif code == "ext":
            expr = f"Extent(v[{i}], v[{i + 1}:{i + 4}], v[{i + 4}:{i + 7}])"
        elif code in ("9f", "6I"):
            k = 3
            expr = "(" + ", ".join(f"v[{i + j}:{i + j + k}]" for j in range(0, n, k)) + ",)"
        elif n == 1:
            expr = f"v[{i}]"
        else:
            expr = f"v[{i}:{i + n}]"
        lines.append(f"    obj.{name} = {expr}")
        i += n
    src = "def assign(obj, v):\n" + ("\n".join(lines) or "    pass") + "\n"
    scope = {"fixed_string": fixed_string, "Extent": Extent}
    exec(src, scope)  # noqa: S102 - generated from the constant layouts below, never from input
    return scope["assign"]


MODEL_INFO = Layout([("name", "s80"), ("animation_file", "s260"), ("extent", "ext"), ("blend_time", "I")])
SEQUENCE = Layout([
    ("name", "s80"), ("interval", "2I"), ("move_speed", "f"), ("flags", "I"), ("rarity", "f"),
    ("sync_point", "I"), ("extent", "ext"),
])
TEXTURE = Layout([("replaceable_id", "I"), ("path", "s260"), ("flags", "I")])
SOUND_TRACK = Layout([("path", "s260"), ("volume", "f"), ("pitch", "f"), ("flags", "I")])
FACE_EFFECT = Layout([("target", "s80"), ("path", "s260")])
GEOSET_ANIMATION = Layout([("alpha", "f"), ("flags", "I"), ("color", "3f"), ("geoset_id", "I")])
BONE = Layout([("geoset_id", "i"), ("geoset_animation_id", "i")])
HELPER = Layout([])
LIGHT = Layout([
    ("type", "I"), ("attenuation_start", "f"), ("attenuation_end", "f"), ("color", "3f"),
    ("intensity", "f"), ("ambient_color", "3f"), ("ambient_intensity", "f"),
])
LIGHT_1200 = Layout(LIGHT.fields + [("shadow_intensity", "f")])
ATTACHMENT = Layout([("path", "s260"), ("attachment_id", "I")])
PARTICLE_EMITTER = Layout([
    ("emission_rate", "f"), ("gravity", "f"), ("longitude", "f"), ("latitude", "f"), ("path", "s260"),
    ("lifespan", "f"), ("speed", "f"),
])
PARTICLE_EMITTER2 = Layout([
    ("speed", "f"), ("variation", "f"), ("latitude", "f"), ("gravity", "f"), ("lifespan", "f"),
    ("emission_rate", "f"), ("length", "f"), ("width", "f"), ("filter_mode", "I"), ("rows", "I"),
    ("columns", "I"), ("head_or_tail", "I"), ("tail_length", "f"), ("time", "f"),
    ("segment_colors", "9f"), ("segment_alphas", "3B"), ("segment_scaling", "3f"),
    ("head_intervals", "6I"), ("tail_intervals", "6I"), ("texture_id", "i"), ("squirt", "I"),
    ("priority_plane", "i"), ("replaceable_id", "I"),
])
RIBBON_EMITTER = Layout([
    ("height_above", "f"), ("height_below", "f"), ("alpha", "f"), ("color", "3f"), ("lifespan", "f"),
    ("texture_slot", "I"), ("emission_rate", "I"), ("rows", "I"), ("columns", "I"), ("material_id", "i"),
    ("gravity", "f"),
])
CAMERA = Layout([
    ("name", "s80"), ("position", "3f"), ("field_of_view", "f"), ("far_clip", "f"), ("near_clip", "f"),
    ("target", "3f"),
])
POPCORN_EMITTER = Layout([
    ("lifespan", "f"), ("emission_rate", "f"), ("speed", "f"), ("color", "3f"), ("alpha", "f"),
    ("replaceable_id", "I"), ("path", "s260"), ("animation_visibility_guide", "s260"),
])
TEXTURE_ANIMATION = Layout([])
