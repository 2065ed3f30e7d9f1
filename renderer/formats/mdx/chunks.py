"""The chunk table: which model list each MDX chunk fills and how its records are read and written."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from .geosets import read_geoset, write_geoset
from .materials import read_material, write_material
from .objects import read_collision_shape, read_event_object, write_collision_shape, write_event_object
from .records import FIXED_RECORDS, RECORDS

U32 = struct.Struct("<I")


@dataclass(frozen=True)
class RecordChunk:
    """A chunk made of records walked one after another until the chunk is consumed."""

    attr: str
    read: Callable
    write: Callable
    label: str


def _spec(tag: str, attr: str) -> RecordChunk:
    s = RECORDS[tag]
    return RecordChunk(attr, s.read, lambda obj, v, out: s.write(obj, v, out), s.label)


RECORD_CHUNKS: dict[str, RecordChunk] = {
    "MTLS": RecordChunk("materials", read_material, write_material, "material"),
    "TXAN": _spec("TXAN", "texture_animations"),
    "GEOS": RecordChunk("geosets", read_geoset, write_geoset, "geoset"),  # read specially
    "GEOA": _spec("GEOA", "geoset_animations"),
    "BONE": _spec("BONE", "bones"),
    "LITE": _spec("LITE", "lights"),
    "HELP": _spec("HELP", "helpers"),
    "ATCH": _spec("ATCH", "attachments"),
    "PREM": _spec("PREM", "particle_emitters"),
    "PRE2": _spec("PRE2", "particle_emitters2"),
    "RIBB": _spec("RIBB", "ribbon_emitters"),
    "CAMS": _spec("CAMS", "cameras"),
    "EVTS": RecordChunk("event_objects", read_event_object, write_event_object, "event object"),
    "CLID": RecordChunk("collision_shapes", read_collision_shape, write_collision_shape, "collision shape"),
    "CORN": _spec("CORN", "popcorn_emitters"),
}

FIXED_CHUNKS = {
    "SEQS": "sequences",
    "TEXS": "textures",
    "SNDS": "sounds",
    "FAFX": "face_effects",
}
assert set(FIXED_CHUNKS) == set(FIXED_RECORDS)

# The order we write chunks in when a model carries no layout of its own (e.g. built from MDL).
CANONICAL_ORDER = (
    "VERS", "MODL", "SEQS", "GLBS", "MTLS", "TEXS", "SNDS", "TXAN", "GEOS", "GEOA", "BONE", "LITE", "HELP",
    "ATCH", "PIVT", "PREM", "PRE2", "CORN", "RIBB", "EVTS", "CAMS", "CLID", "BPOS", "FAFX",
)
KNOWN_CHUNKS = frozenset(CANONICAL_ORDER)
