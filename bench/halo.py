"""Halo model tag load time per MB over the corpus, with ratios against references measured in the same run.

    .venv/bin/python bench/halo.py [--repeat N] [paths...]

For every corpus `.model` / `.gbxmodel` (or the paths given) it times, as the median of N runs:

- load:   `load_model(path)`: read, parse every block, build the neutral model for the default
          LOD/permutations, follow shader references and check the base map bitmap tags' headers.
- parse:  `read_halo_model(bytes, tag_root=None)`: the same without touching any other file.
- floor:  read the file's bytes and copy them into a numpy array (what no loader can beat).
- naive:  a per-element Python reference on the same block walk (struct.unpack per vertex, a Python
          loop over each strip) over every part of every geometry: what vectorising saves.

It prints per-file times and the totals as ms per MB and the ratios load/floor and naive/parse.
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from renderer.formats import load_model  # noqa: E402
from renderer.formats.halo import read_halo_model, read_model_tag  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
VERTEX = struct.Struct(">14f2h2f")


def timed(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def floor(path: Path) -> None:
    data = path.read_bytes()
    np.frombuffer(data, np.uint8).copy()


def naive(path: Path) -> int:
    """Per-element Python decoding of every part (vertices; strips -> triangles), as the loader touches them."""
    data = path.read_bytes()
    tag = read_model_tag(data, str(path))
    triangles = 0
    for geometry in tag.geometries:
        for part in geometry.parts:
            raw = part.uncompressed.tobytes()
            verts = [VERTEX.unpack_from(raw, i * 68) for i in range(len(part.uncompressed))]
            _ = [(v[0:3], v[3:6], v[12:14], v[14:16], v[16:18]) for v in verts]
            s = [int(x) for x in part.strip]
            while s and s[-1] == 0xFFFF:
                s.pop()
            out = []
            for k in range(len(s) - 2):
                t = (s[k], s[k + 2], s[k + 1]) if k % 2 == 0 else (s[k], s[k + 1], s[k + 2])
                if 0xFFFF in t or t[0] == t[1] or t[1] == t[2] or t[0] == t[2]:
                    continue
                out.append(t)
            triangles += len(out)
    return triangles


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    paths = args.paths or sorted(set(CORPUS.rglob("*.gbxmodel")) | set(CORPUS.rglob("*.model")))
    if not paths:
        print("no Halo model tags found", file=sys.stderr)
        return 1
    totals = dict(bytes=0, load=0.0, parse=0.0, floor=0.0, naive=0.0)
    print(f"{'file':44s} {'KB':>8s} {'load ms':>8s} {'parse ms':>8s} {'floor ms':>8s} {'naive ms':>9s} "
          f"{'load/floor':>10s} {'naive/parse':>11s}")
    for p in paths:  # warm the file cache, imports and the loader's code paths
        load_model(p)
        floor(p)
    for p in paths:
        data = p.read_bytes()
        t_load = timed(lambda p=p: load_model(p), args.repeat)
        t_parse = timed(lambda d=data, p=p: read_halo_model(d, str(p), tag_root=None), args.repeat)
        t_floor = timed(lambda p=p: floor(p), args.repeat)
        t_naive = timed(lambda p=p: naive(p), max(1, args.repeat // 2))
        totals["bytes"] += len(data)
        for k, v in (("load", t_load), ("parse", t_parse), ("floor", t_floor), ("naive", t_naive)):
            totals[k] += v
        print(f"{p.name[:44]:44s} {len(data) / 1024:8.1f} {t_load * 1e3:8.2f} {t_parse * 1e3:8.2f} "
              f"{t_floor * 1e3:8.3f} {t_naive * 1e3:9.2f} {t_load / t_floor:10.1f} {t_naive / t_parse:11.1f}")
    mb = totals["bytes"] / 1e6
    print()
    print(f"{len(paths)} tags, {mb:.2f} MB")
    for k in ("load", "parse", "floor", "naive"):
        t = totals[k]
        print(f"  {k:6s} {t * 1e3:9.2f} ms total  {t * 1e3 / mb:8.2f} ms/MB  {mb / t:8.1f} MB/s")
    print(f"  load / floor  = {totals['load'] / totals['floor']:.1f}x")
    print(f"  parse / floor = {totals['parse'] / totals['floor']:.1f}x")
    print(f"  naive / parse = {totals['naive'] / totals['parse']:.1f}x (per-element Python vs the loader)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
