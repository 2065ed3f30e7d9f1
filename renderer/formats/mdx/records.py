"""Record codecs for the chunks made of records: one `RecordSpec` per chunk tag.

Most records are a fixed layout (optionally after an inclusive size and a node header) followed by
keyframe tracks; bytes a record holds past what we know are kept in `extra` and written back.
Materials, geosets, event objects and collision shapes have their own modules.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from renderer import model as m

from . import layouts as L
from .binary import Reader, append_sized
from .nodes import read_node, write_node
from .tracks import read_tracks, write_track

U32 = struct.Struct("<I")


@dataclass(frozen=True)
class RecordSpec:
    cls: type
    layout: Callable[[int], L.Layout]  # version -> layout
    inclusive: bool
    node: bool
    tracks: frozenset[str] = frozenset()
    label: str = "record"

    def read(self, r: Reader, version: int):
        obj = self.cls()
        rr = r.inclusive(self.label) if self.inclusive else r
        if self.node:
            read_node(rr, obj)
        self.layout(version).read(rr, obj, f"{self.label} fields")
        if self.tracks:
            obj.tracks = {}
            read_tracks(rr, self.tracks, obj.tracks)
        if self.inclusive:
            obj.extra = rr.rest()
        return obj

    def write(self, obj, version: int, out: list) -> None:
        body: list = []
        if self.node:
            write_node(obj, body)
        body.append(self.layout(version).pack(obj))
        if self.tracks:
            for t in obj.tracks.values():
                write_track(t, body)
        if self.inclusive:
            body.append(obj.extra)
            append_sized(out, body)
        else:
            out.extend(body)


def _fixed(layout: L.Layout):
    return lambda version: layout


RECORDS: dict[str, RecordSpec] = {
    "TXAN": RecordSpec(m.TextureAnimation, _fixed(L.TEXTURE_ANIMATION), True, False,
                       frozenset({"KTAT", "KTAR", "KTAS"}), "texture animation"),
    "GEOA": RecordSpec(m.GeosetAnimation, _fixed(L.GEOSET_ANIMATION), True, False,
                       frozenset({"KGAO", "KGAC"}), "geoset animation"),
    "BONE": RecordSpec(m.Bone, _fixed(L.BONE), False, True, label="bone"),
    "HELP": RecordSpec(m.Helper, _fixed(L.HELPER), False, True, label="helper"),
    "LITE": RecordSpec(m.Light, lambda v: L.LIGHT_1200 if v >= 1200 else L.LIGHT, True, True,
                       frozenset({"KLAS", "KLAE", "KLAC", "KLAI", "KLBI", "KLBC", "KLAV"}), "light"),
    "ATCH": RecordSpec(m.Attachment, _fixed(L.ATTACHMENT), True, True, frozenset({"KATV"}), "attachment"),
    "PREM": RecordSpec(m.ParticleEmitter, _fixed(L.PARTICLE_EMITTER), True, True,
                       frozenset({"KPEE", "KPEG", "KPLN", "KPLT", "KPEL", "KPES", "KPEV"}), "particle emitter"),
    "PRE2": RecordSpec(m.ParticleEmitter2, _fixed(L.PARTICLE_EMITTER2), True, True,
                       frozenset({"KP2S", "KP2R", "KP2L", "KP2G", "KP2E", "KP2N", "KP2W", "KP2V"}),
                       "particle emitter 2"),
    "RIBB": RecordSpec(m.RibbonEmitter, _fixed(L.RIBBON_EMITTER), True, True,
                       frozenset({"KRHA", "KRHB", "KRAL", "KRCO", "KRTX", "KRVS"}), "ribbon emitter"),
    "CAMS": RecordSpec(m.ModelCamera, _fixed(L.CAMERA), True, False, frozenset({"KCTR", "KTTR", "KCRL"}), "camera"),
    "CORN": RecordSpec(m.PopcornEmitter, _fixed(L.POPCORN_EMITTER), True, True,
                       frozenset({"KPPA", "KPPC", "KPPE", "KPPL", "KPPS", "KPPV"}), "popcorn emitter"),
}

# Fixed-size records: chunk size must be a multiple of the record size.
FIXED_RECORDS: dict[str, tuple[type, L.Layout, str]] = {
    "SEQS": (m.Sequence, L.SEQUENCE, "sequence"),
    "TEXS": (m.Texture, L.TEXTURE, "texture"),
    "SNDS": (m.SoundTrack, L.SOUND_TRACK, "sound track"),
    "FAFX": (m.FaceEffect, L.FACE_EFFECT, "face effect"),
}
