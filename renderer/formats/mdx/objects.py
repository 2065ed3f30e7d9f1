"""EVTS event objects and CLID collision shapes: node records sized by their structure."""

from __future__ import annotations

import struct

import numpy as np

from renderer.model import CollisionShape, EventObject

from .binary import Reader
from .nodes import read_node, write_node

U32 = struct.Struct("<I")
KEVT_HEAD = struct.Struct("<4sIi")
VEC3 = struct.Struct("<3f")
F32 = struct.Struct("<f")

# Collision shape type -> (vertex count, has radius)
SHAPES = {0: (2, False), 1: (2, False), 2: (1, True), 3: (2, True)}


def read_event_object(r: Reader, version: int) -> EventObject:
    ev = EventObject()
    read_node(r, ev)
    if r.peek_tag() == "KEVT":
        at = r.pos
        _, n, ev.global_sequence_id = r.unpack(KEVT_HEAD, "KEVT header")
        if n * 4 > r.remaining:
            raise r.error(f"KEVT declares {n} frames ({n * 4} bytes) but only {r.remaining} bytes remain", at + 4)
        ev.frames = r.array("<i4", n, "KEVT frames")
    return ev


def write_event_object(ev: EventObject, version: int, out: list) -> None:
    write_node(ev, out)
    if ev.frames is not None:
        frames = np.ascontiguousarray(ev.frames, "<i4")
        out.append(KEVT_HEAD.pack(b"KEVT", len(frames), ev.global_sequence_id))
        out.append(frames.tobytes())


def read_collision_shape(r: Reader, version: int) -> CollisionShape:
    cs = CollisionShape()
    read_node(r, cs)
    at = r.pos
    cs.type = r.u32("collision shape type")
    if cs.type not in SHAPES:
        raise r.error(f"collision shape type {cs.type} is not 0 (box), 1 (plane), 2 (sphere) or 3 (cylinder)", at)
    nverts, has_radius = SHAPES[cs.type]
    cs.vertices = tuple(r.unpack(VEC3, "collision shape vertex") for _ in range(nverts))
    cs.radius = r.unpack(F32, "collision shape radius")[0] if has_radius else 0.0
    return cs


def write_collision_shape(cs: CollisionShape, version: int, out: list) -> None:
    write_node(cs, out)
    if cs.type not in SHAPES:
        raise ValueError(f"collision shape {cs.name!r} has unknown type {cs.type}")
    nverts, has_radius = SHAPES[cs.type]
    out.append(U32.pack(cs.type))
    for v in cs.vertices[:nverts]:
        out.append(VEC3.pack(*v))
    if has_radius:
        out.append(F32.pack(cs.radius))
