"""Model-level mutations for the fuzz harness: hostile values the byte mutations rarely reach.

A corpus MDX or MDL file is loaded, 1..4 edits are applied to its Model and it is written back in
its own format (`mutate_model`). The edits: object ids near 2^32 or colliding, parents that name
nothing, themselves or a cycle, non-finite or huge pivots, emitter fields (lifespans, rates,
speeds, gravity, atlas rows and columns, filter modes, head/tail, squirt), keyframe values and
frames, sequence intervals and global sequence durations, MATS entries and vertex groups; and (issue
23) deep parent chains (up to 100,000 helpers, each the child of the one before), negative and
huge ids on every kind of node, and non-finite or huge extents (model, geoset, sequence). Values
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


CHAIN_LENGTHS = (1000, 1000, 10_000, 10_000, 100_000)


def _deep_chain(m, rng):
    """A chain of helpers, each the child of the one before, hung under an existing node (or the root)."""
    from renderer.model import Helper

    n = rng.choice(CHAIN_LENGTHS)
    ids = [int(x.object_id) & 0xFFFFFFFF for x in m.nodes()]
    first = max(ids, default=-1) + 1
    if first + n > 0x7FFFFFFF:
        first = 0
    parent = rng.choice(ids) if ids and rng.random() < 0.5 else -1
    chain = []
    for i in range(n):
        chain.append(Helper(name=f"chain{i}", object_id=first + i, parent_id=_i32(parent)))
        parent = first + i
    if rng.random() < 0.3:  # close the chain into a cycle
        chain[0].parent_id = chain[-1].object_id
    m.helpers = list(m.helpers) + chain
    pivots = np.array(m.pivots, np.float32).reshape(-1, 3)
    m.pivots = np.concatenate([pivots, np.zeros((len(m.nodes()) - len(pivots), 3), np.float32)])


def _negative_ids(m, rng):
    nodes = m.nodes()
    for node in rng.sample(nodes, min(len(nodes), rng.randint(1, 3))):
        value = rng.choice((-1, -2, -(1 << 31), -1000, (1 << 31) - 1))
        if rng.random() < 0.5:
            node.object_id = value & 0xFFFFFFFF
        else:
            node.parent_id = value


def _extents(m, rng):
    extents = [m.extent] + [g.extent for g in m.geosets] + [s.extent for s in m.sequences]
    extents += [e for g in m.geosets for e in g.sequence_extents]
    e = rng.choice(extents)
    bad = float(rng.choice(HOSTILE_FLOATS))
    which = rng.randrange(3)
    if which == 0:
        e.radius = bad
    else:
        v = list(getattr(e, ("min", "max")[which - 1]))
        v[rng.randrange(3)] = bad
        setattr(e, ("min", "max")[which - 1], tuple(v))


EDITS = (_ids, _all_ids_huge, _parents, _pivots, _emitter, _emitter, _tracks, _tracks, _sequences, _skinning,
         _deep_chain, _negative_ids, _extents, _extents)


def mutate_model(model, rng: random.Random):
    """Apply 1..4 edits to `model` in place; returns it."""
    for _ in range(rng.randint(1, 4)):
        rng.choice(EDITS)(model, rng)
    return model
