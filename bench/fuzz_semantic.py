"""Model-level mutations for the fuzz harness: hostile values the byte mutations rarely reach.

A corpus MDX or MDL file is loaded, 1..4 edits are applied to its Model and it is written back in
its own format (`mutate_model`). The edits: object ids near 2^32 or colliding, parents that name
nothing, themselves or a cycle, non-finite or huge pivots, emitter fields (lifespans, rates,
speeds, gravity, atlas rows and columns, filter modes, head/tail, squirt), keyframe values and
frames, sequence intervals and global sequence durations, MATS entries and vertex groups. Values
stay within what the file's fields can hold (u32 ids, i32 parents), so the writer can write them.
"""

from __future__ import annotations

import random

import numpy as np
from fuzz_mutate import HOSTILE_FLOATS, INTERESTING_U32

HOSTILE_SCALARS = (*HOSTILE_FLOATS, 0.0, -1.0, 1e9, 1e6, 3600.0, 1e-6)


def _i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def _ids(m, rng):
    nodes = m.nodes()
    if nodes:
        node = rng.choice(nodes)
        node.object_id = rng.choice(INTERESTING_U32) if rng.random() < 0.7 else rng.choice(nodes).object_id


def _all_ids_huge(m, rng):
    nodes = m.nodes()
    base = rng.choice((0xFFFFFFFF - len(nodes) - 1, 1 << 31, rng.randrange(1 << 32 - 1)))
    new = {}
    for i, n in enumerate(nodes):
        new.setdefault(int(n.object_id), (base + 97 * i) & 0xFFFFFFFF)
    for n in nodes:
        n.object_id = new[int(n.object_id)]
        p = int(n.parent_id) & 0xFFFFFFFF
        if p in new:
            n.parent_id = _i32(new[p])
    for g in m.geosets:
        if len(g.matrix_indices):
            g.matrix_indices = np.array([new.get(int(v), int(v)) for v in g.matrix_indices], "<u4")


def _parents(m, rng):
    nodes = m.nodes()
    if nodes:
        node = rng.choice(nodes)
        choice = rng.randrange(4)
        node.parent_id = (_i32(rng.choice(INTERESTING_U32)), node.object_id, rng.choice(nodes).object_id, -1)[choice]
        node.parent_id = _i32(node.parent_id)


def _pivots(m, rng):
    if len(m.pivots):
        p = np.array(m.pivots, np.float32)
        p[rng.randrange(len(p)), rng.randrange(3)] = rng.choice(HOSTILE_FLOATS)
        m.pivots = p


def _emitter(m, rng):
    emitters = list(m.particle_emitters2) + list(m.particle_emitters) + list(m.ribbon_emitters)
    if not emitters:
        return
    e = rng.choice(emitters)
    floats = [f for f in ("lifespan", "emission_rate", "speed", "gravity", "latitude", "longitude", "variation",
                          "tail_length", "time", "length", "width", "height_above", "height_below", "alpha")
              if hasattr(e, f)]
    ints = [f for f in ("rows", "columns", "filter_mode", "head_or_tail", "squirt", "texture_id", "priority_plane",
                        "replaceable_id", "material_id", "texture_slot") if hasattr(e, f)]
    if rng.random() < 0.6 and floats:
        setattr(e, rng.choice(floats), float(rng.choice(HOSTILE_SCALARS)))
    elif ints:
        setattr(e, rng.choice(ints), rng.choice(INTERESTING_U32))


def _tracks(m, rng):
    tracked = [t for n in m.nodes() for t in (*n.node_tracks.values(), *getattr(n, "tracks", {}).values())]
    tracked += [t for mat in m.materials for lay in mat.layers for t in lay.tracks.values()]
    if not tracked:
        return
    t = rng.choice(tracked)
    if not len(t.keys):
        return
    keys = t.keys.copy()
    i = rng.randrange(len(keys))
    if rng.random() < 0.5 and keys["value"].dtype.kind == "f":
        v = keys["value"].reshape(len(keys), -1)
        v[i, rng.randrange(v.shape[1])] = rng.choice(HOSTILE_FLOATS)
    elif keys["value"].dtype.kind == "u":
        keys["value"].reshape(len(keys), -1)[i] = rng.choice(INTERESTING_U32)
    else:
        keys["frame"][i] = _i32(rng.choice(INTERESTING_U32))
    t.keys = keys


def _sequences(m, rng):
    if m.sequences and rng.random() < 0.6:
        s = rng.choice(m.sequences)
        a, b = (rng.choice(INTERESTING_U32) for _ in range(2))
        s.interval = (a, b) if rng.random() < 0.5 else (s.interval[0], a)
        s.flags = rng.choice((0, 1, 0xFFFFFFFF))
    elif m.global_sequences:
        g = list(m.global_sequences)
        g[rng.randrange(len(g))] = rng.choice(INTERESTING_U32)
        m.global_sequences = g


def _skinning(m, rng):
    if not m.geosets:
        return
    g = rng.choice(m.geosets)
    if len(g.matrix_indices) and rng.random() < 0.6:
        mats = np.array(g.matrix_indices, "<u4")
        mats[rng.randrange(len(mats))] = rng.choice(INTERESTING_U32)
        g.matrix_indices = mats
    elif len(g.vertex_groups):
        vg = np.array(g.vertex_groups)
        vg[rng.randrange(len(vg))] = rng.randrange(256)
        g.vertex_groups = vg


EDITS = (_ids, _all_ids_huge, _parents, _pivots, _emitter, _emitter, _tracks, _tracks, _sequences, _skinning)


def mutate_model(model, rng: random.Random):
    """Apply 1..4 edits to `model` in place; returns it."""
    for _ in range(rng.randint(1, 4)):
        rng.choice(EDITS)(model, rng)
    return model
