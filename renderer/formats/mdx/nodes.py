"""The node header shared by BONE, LITE, HELP, ATCH, PREM, PRE2, RIBB, EVTS, CLID and CORN."""

from __future__ import annotations

import struct

from renderer.model import Node

from .binary import Reader, append_sized, encode_fixed, fixed_string
from .tracks import NODE_TRACKS, read_tracks, write_track

NODE_IDS = struct.Struct("<IiI")  # objectId, parentId, flags
NODE_FIXED = 4 + 80 + NODE_IDS.size  # 96


def read_node(r: Reader, node: Node) -> None:
    start = r.pos
    size = r.u32("node inclusive size")
    if size < NODE_FIXED or size - 4 > r.remaining:
        raise r.error(
            f"node inclusive size {size} is outside 96..{r.remaining + 4} (the bytes left in the record)",
            start,
        )
    nr = Reader(r.buf, r.path, r.where + " node", r.pos, start + size)
    r.pos = start + size
    node.name = fixed_string(nr.raw(80, "node name"))
    node.object_id, node.parent_id, node.flags = nr.unpack(NODE_IDS, "node ids and flags")
    node.node_tracks = {}
    read_tracks(nr, NODE_TRACKS, node.node_tracks)
    node.node_extra = nr.rest()


def write_node(node: Node, out: list) -> None:
    body: list = [encode_fixed(node.name, 80, "node name")]
    body.append(NODE_IDS.pack(node.object_id, node.parent_id, node.flags))
    for t in node.node_tracks.values():
        write_track(t, body)
    body.append(node.node_extra)
    append_sized(out, body)
