"""Posing cost of a model whose object ids are near 2^32 against the same model with ids 0..N-1.

The model is a corpus model (default: DarionMograineEvil) with every object id (and the parent, MATS
references to it; pivots, which are indexed by object id, are zeroed in both) moved to 2^32 - 2 - 97
k; both copies go through the MDX writer and reader, then build an Animator and pose --frames frames
(best of --rounds). Object ids never size anything, so the two columns should match (the old id-
sized arrays took seconds and gigabytes).

    .venv/bin/python bench/node_ids.py [--model path/to/model.mdx] [--frames 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from renderer.anim import Animator  # noqa: E402
from renderer.formats import load_model  # noqa: E402
from renderer.formats.mdx import read_mdx, write_mdx  # noqa: E402

DEFAULT = (Path(__file__).resolve().parents[2] / "shared" / "corpus" / "pqhuy98__Warcraft3" / "silverpine-forest"
           / "maps" / "silverpine.w3x" / "Models" / "DarionMograineEvil" / "DarionMograineEvil.mdx")


def hostile(model):
    """A copy with object id k moved to 2^32 - 2 - 97 k (parents as i32 bit patterns)."""
    m = copy.deepcopy(model)
    ids = sorted({int(n.object_id) for n in m.nodes()})
    new = {oid: 2**32 - 2 - 97 * i for i, oid in enumerate(ids)}

    def i32(v):
        return v - 2**32 if v >= 2**31 else v

    for n in m.nodes():
        n.object_id = new[int(n.object_id)]
        if int(n.parent_id) in new:
            n.parent_id = i32(new[int(n.parent_id)])
    look = np.vectorize(lambda v: new.get(int(v), int(v)), otypes=[np.int64])
    for g in m.geosets:
        if len(g.matrix_indices):
            g.matrix_indices = look(g.matrix_indices).astype("<u4")
    return m


def bench(model, frames: int, rounds: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    anim = Animator(model)
    build_ms = (time.perf_counter() - t0) * 1e3
    seqs = model.sequences or [None]
    work = [(i % len(seqs), 37.0 * i) for i in range(frames)]
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for si, t in work:
            anim.pose(si if model.sequences else None, t)
        best = min(best, (time.perf_counter() - t0) / frames * 1e3)
    return build_ms, best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT)
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    base = load_model(a.model)
    if any(g.skin is not None and len(g.skin) for g in base.geosets):
        sys.exit("pick a model without SKIN (its u8 bone indices cannot name ids near 2^32)")
    base.pivots = np.zeros_like(base.pivots)  # pivots are indexed by object id: the origin for both copies
    plain = read_mdx(write_mdx(base), "plain.mdx")
    huge = read_mdx(write_mdx(hostile(base)), "huge.mdx")
    print(f"{a.model.name}: {len(plain.nodes())} nodes; ids 0..{max(n.object_id for n in plain.nodes())} "
          f"vs {min(n.object_id for n in huge.nodes())}..{max(n.object_id for n in huge.nodes())}")
    for label, m in (("ids 0..N", plain), ("ids near 2^32", huge)):
        build_ms, pose_ms = bench(m, a.frames, a.rounds)
        print(f"  {label:<14} Animator {build_ms:8.2f} ms   pose {pose_ms:7.3f} ms/frame   "
              f"max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    pa, pb = Animator(plain), Animator(huge)
    rows = pb.skeleton.rows([2**32 - 2 - 97 * i for i in range(pa.skeleton.count)])
    same = all(np.array_equal(pa.pose(0, t).node_matrices, pb.pose(0, t).node_matrices[rows]) for t in (0, 500, 1234))
    print(f"  node matrices equal: {same}")


if __name__ == "__main__":
    main()
