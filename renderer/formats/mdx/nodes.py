"""The node header shared by BONE, LITE, HELP, ATCH, PREM, PRE2, RIBB, EVTS, CLID and CORN."""

from __future__ import annotations

import struct

from renderer.model import Node

from .binary import Reader, append_sized, encode_fixed, fixed_string
from .tracks import NODE_TRACKS, read_tracks, write_track

NODE_IDS = struct.Struct("<IiI")  # objectId, parentId, flags
NODE_FIXED = 4 + 80 + NODE_IDS.size  # 96


NODE_HEAD = struct.Struct("<I80sIiI")  # inclusive size, name, objectId, parentId, flags


def read_node(r: Reader, node: Node) -> None:
    start = r.pos
    if r.end - start < NODE_FIXED:
        r.need(NODE_FIXED, "node header")
    size, name, node.object_id, node.parent_id, node.flags = NODE_HEAD.unpack_from(r.buf, start)
    if size < NODE_FIXED or size > r.end - start:
        raise r.error(
            f"node inclusive size {size} is outside 96..{r.remaining} (the bytes left in the record)", start
        )
    node.name = fixed_string(name)
    node.node_tracks = {}
    r.pos = start + size
    if size > NODE_FIXED:
        nr = Reader(r.buf, r.path, r.where + " node", start + NODE_FIXED, start + size)
        read_tracks(nr, NODE_TRACKS, node.node_tracks)
        node.node_extra = nr.rest()


def write_node(node: Node, out: list) -> None:
    body: list = [encode_fixed(node.name, 80, "node name")]
    # Ids are 32-bit patterns (u32 object id, i32 parent): a parent given as 2^31.. is written wrapped.
    parent = int(node.parent_id) & 0xFFFFFFFF
    body.append(NODE_IDS.pack(int(node.object_id) & 0xFFFFFFFF, parent - (1 << 32) if parent >> 31 else parent,
                              node.flags))
    for t in node.node_tracks.values():
        write_track(t, body)
    body.append(node.node_extra)
    append_sized(out, body)
