"""Animation cost per frame on the corpus' largest skeletons, as ratios against references measured
in the same run.

    .venv/bin/python bench/animate.py                 # Girl2, Ghost, Darion
    .venv/bin/python bench/animate.py --frames 400 --rounds 5 path/to/model.mdx ...

Per model: `Animator(model)` is built once (compile time is printed apart, plans included: every
sequence is warmed up first); then one "frame" is the full CPU work a render needs from animation,
`Animator.pose(sequence, t, view)`: sample every track, node world matrices, geoset/layer/UV values and
every geoset's palette. Frames sweep all sequences at evenly spaced timestamps. The result is the best
of --rounds rounds, in ms per frame; the parts (track sampling, skeleton, palettes) are timed the same
way.

References, in the same process on the same frames:
  * naive: a per-key Python loop sampler (the viewer's algorithm, one track at a time) for the node
    tracks plus a per-node Python matrix product down the hierarchy, i.e. the straightforward port;
  * floor: one batched numpy matmul of all (N, 4, 4) node matrices with themselves, the cost of
    touching every node matrix once; no skeleton update can be cheaper than a few of these.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from renderer.anim import Animator, look_at  # noqa: E402
from renderer.anim.tracks import STEP_TAGS, default_value  # noqa: E402
from renderer.formats import load_model  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
SILVERPINE = "pqhuy98__Warcraft3/silverpine-forest/maps/silverpine.w3x/Models/"
DEFAULT_MODELS = [
    SILVERPINE + "VillagersReReforged/Girl2.mdx",
    "nazarpunk__wc3-map-edemium-legacy/map/war3mapImported/Ghost.mdx",
    SILVERPINE + "DarionMograineEvil/DarionMograineEvil.mdx",
]
VIEW = look_at([300, 200, 150], [0, 0, 60])


# ------------------------------------------------------------------------------ naive reference


def naive_sample(track, start, end, frame, gtimes, gsd):
    """One track, key by key in Python (the viewer's SdSequence.getValue)."""
    k = len(default_value(track.tag))
    gs = track.global_sequence_id
    if 0 <= gs < len(gsd):
        if gsd[gs] <= 0 or track.keys["frame"][0] > gsd[gs]:
            return [float(x) for x in np.reshape(track.keys["value"][0], k)]
        start, end, frame = 0, gsd[gs], gtimes[gs]
    keys = [key for key in track.keys if start <= key["frame"] <= end]
    if not keys:
        return list(default_value(track.tag))
    vals = [[float(x) for x in np.reshape(key["value"], k)] for key in keys]
    if len(keys) == 1 or all(v == vals[0] for v in vals) or frame < start:
        return vals[0]
    n = len(keys)
    if frame < keys[0]["frame"] or frame >= keys[-1]["frame"]:
        i0, i1 = n - 1, 0
    else:
        i1 = next(i for i in range(1, n) if keys[i]["frame"] > frame)
        i0 = i1 - 1
    f0, f1 = int(keys[i0]["frame"]), int(keys[i1]["frame"])
    dt = f1 - f0
    if dt < 0:
        dt += end - start
        if frame < f0:
            f0 = f1
    t = 0.0 if dt == 0 else (frame - f0) / dt
    p0, p1 = vals[i0], vals[i1]
    if track.interpolation == 0 or track.tag in STEP_TAGS:
        return p0
    if k == 4:  # linear slerp only in this reference (squad costs about twice as much)
        cos = sum(a * b for a, b in zip(p0, p1, strict=True))
        if cos < 0:
            cos, p1 = -cos, [-x for x in p1]
        if 1 - cos > 1e-6:
            om = math.acos(min(cos, 1.0))
            s0, s1 = math.sin((1 - t) * om) / math.sin(om), math.sin(t * om) / math.sin(om)
        else:
            s0, s1 = 1 - t, t
        return [s0 * a + s1 * b for a, b in zip(p0, p1, strict=True)]
    return [a + t * (b - a) for a, b in zip(p0, p1, strict=True)]


def naive_frame(model, nodes, seq, t_ms):
    start, end = seq.interval
    frame = start + min(t_ms, end - start)
    gsd = model.global_sequences
    gtimes = [t_ms % d if d > 0 else 0 for d in gsd]
    world = {}
    for node in nodes:  # parents before children (nodes is given in that order)
        tr = node.node_tracks
        t = naive_sample(tr["KGTR"], start, end, frame, gtimes, gsd) if "KGTR" in tr else [0, 0, 0]
        q = naive_sample(tr["KGRT"], start, end, frame, gtimes, gsd) if "KGRT" in tr else [0, 0, 0, 1]
        s = naive_sample(tr["KGSC"], start, end, frame, gtimes, gsd) if "KGSC" in tr else [1, 1, 1]
        x, y, z, w = np.asarray(q) / math.sqrt(sum(c * c for c in q))  # as the skeleton: normalised
        r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                      [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                      [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]) * s
        c = model.pivots[node.object_id]
        local = np.eye(4)
        local[:3, :3] = r
        local[:3, 3] = c + t - r @ c
        parent = world.get(node.parent_id)
        world[node.object_id] = local if parent is None else parent @ local
    return world


def hierarchy_order(model):
    nodes = {n.object_id: n for n in model.nodes()}
    done, out = set(), []

    def visit(n, depth=0):
        if n.object_id in done or depth > len(nodes):
            return
        if n.parent_id in nodes and n.parent_id != n.object_id:
            visit(nodes[n.parent_id], depth + 1)
        done.add(n.object_id)
        out.append(n)

    for n in nodes.values():
        visit(n)
    return out


def _below(sk, row, flagged):
    p = int(sk.parents[row])
    while p < sk.count:
        if p in flagged:
            return True
        p = int(sk.parents[p])
    return False


# ------------------------------------------------------------------------------ timing


def best(fn, frames, rounds):
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for args in frames:
            fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times) / len(frames) * 1e3


def bench(path: Path, frames: int, rounds: int, naive_frames: int):
    model = load_model(path)
    t0 = time.perf_counter()
    anim = Animator(model)
    for si in range(len(model.sequences)):
        anim.pose(si, 0, VIEW)  # builds the per-sequence plans
    compile_ms = (time.perf_counter() - t0) * 1e3
    work = []
    per_seq = max(1, frames // max(1, len(model.sequences)))
    for si, seq in enumerate(model.sequences):
        d = seq.interval[1] - seq.interval[0]
        work += [(si, d * (i + 0.5) / per_seq, VIEW) for i in range(per_seq)]
    clocks = [anim.clock(si, t) for si, t, _ in work]

    pose_ms = best(anim.pose, work, rounds)
    sample_ms = best(anim.bank.sample, [(c,) for c in clocks], rounds)
    sampled = [anim.bank.sample(c) for c in clocks]
    skel_ms = best(lambda c, s: anim.node_matrices(c, VIEW, s), list(zip(clocks, sampled, strict=True)), rounds)
    mats = [anim.node_matrices(c, VIEW, s) for c, s in zip(clocks, sampled, strict=True)]
    pal_ms = best(anim.palettes.build, [(m,) for m in mats], rounds)
    n = anim.skeleton.count
    m = mats[0]
    floor_ms = best(np.matmul, [(m, m)] * len(work), rounds)
    order = hierarchy_order(model)
    sub = work[:: max(1, len(work) // naive_frames)]
    naive_ms = best(lambda si, t, _v: naive_frame(model, order, model.sequences[si], t), sub, 1)
    ours_nodes_ms = sample_ms + skel_ms
    # sanity: the naive port agrees with us on the node matrices (first frame, no flags involved)
    ref = naive_frame(model, order, model.sequences[work[0][0]], work[0][1])
    sk = anim.skeleton
    flagged = {i for i in range(n) if sk.special[i]}  # skeleton rows
    plain = [sk.index[o] for o in ref if o in sk.index and sk.index[o] not in flagged
             and not _below(sk, sk.index[o], flagged)]
    err = max((float(np.abs(ref[int(sk.ids[i])] - mats[0][i]).max()) for i in plain), default=0.0)
    return dict(name=path.name, nodes=n, bones=len(model.bones), geosets=len(model.geosets),
                tracks=sum(len(s) for s in anim.bank.sets.values()), frames=len(work), compile_ms=compile_ms,
                pose_ms=pose_ms, sample_ms=sample_ms, skel_ms=skel_ms, pal_ms=pal_ms, floor_ms=floor_ms,
                naive_ms=naive_ms, ours_nodes_ms=ours_nodes_ms, check=err)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="model files (default: Girl2, Ghost, Darion from the corpus)")
    ap.add_argument("--frames", type=int, default=240, help="frames per round, spread over all sequences")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--naive-frames", type=int, default=12, help="frames for the (slow) naive reference")
    ap.add_argument("--no-render", action="store_true", help="skip the whole-frame comparison with the GL floor")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.models] or [CORPUS / p for p in DEFAULT_MODELS]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print("missing model(s): " + ", ".join(map(str, missing)), file=sys.stderr)
        paths = [p for p in paths if p.exists()]
        if not paths:
            return 1
    print(f"{'model':26s} {'nodes':>5s} {'bones':>5s} {'trk':>4s} {'compile':>8s} {'pose':>7s} {'sample':>7s} "
          f"{'skel':>7s} {'palette':>7s} {'naive':>8s} {'x naive':>8s} {'floor':>7s} {'x floor':>8s}")
    for p in paths:
        r = bench(p, args.frames, args.rounds, args.naive_frames)
        print(f"{r['name'][:26]:26s} {r['nodes']:5d} {r['bones']:5d} {r['tracks']:4d} {r['compile_ms']:7.1f}m "
              f"{r['pose_ms']:6.3f}m {r['sample_ms']:6.3f}m {r['skel_ms']:6.3f}m {r['pal_ms']:6.3f}m "
              f"{r['naive_ms']:7.2f}m {r['naive_ms'] / r['ours_nodes_ms']:7.1f}x {r['floor_ms'] * 1e3:5.1f}us "
              f"{r['ours_nodes_ms'] / r['floor_ms']:7.0f}x")
        if r["check"] > 1e-6:
            print(f"  warning: the naive reference differs from ours by {r['check']:.3g}")
    print("ms per frame (best of rounds). pose = everything; sample + skel = tracks and node matrices;")
    print("x naive = naive (per-key Python tracks + per-node Python matrices) / (sample + skel);")
    print("x floor = (sample + skel) / one numpy matmul of all node matrices.")
    if not args.no_render:
        render_vs_floor(paths, args.rounds)
    return 0


def render_vs_floor(paths, rounds: int, size: int = 512) -> None:
    """Animated frames through the whole renderer against the bare GL floor of bench/render.py (the
    same vertex buffers, a constant-colour shader, one readback) and a still frame, in one run."""
    import os

    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    sys.path.insert(0, str(ROOT / "bench"))
    from render import FLOOR_FS, FLOOR_VS, best, draw_floor

    from renderer.camera import resolve_camera
    from renderer.frame import FrameSpec, Renderer
    from renderer.gl.framebuffer import Framebuffer
    from renderer.gl.shaders import build_program

    r = Renderer()
    prog = None
    print(f"\nwhole frames at {size}x{size} (best of {rounds}; animated = every frame at another time of a sequence):")
    print(f"{'model':26s} {'animated':>9s} {'still':>8s} {'GL floor':>9s} {'anim/floor':>10s}")
    for p in paths:
        model = load_model(p)
        seq = max(range(len(model.sequences)), key=lambda i: np.subtract(*model.sequences[i].interval[::-1]))
        length = max(model.sequences[seq].interval[1] - model.sequences[seq].interval[0], 1)
        specs = [FrameSpec(sequence=seq, time_ms=int(t), width=size, height=size)
                 for t in np.linspace(0, length, 24)]
        r.render(model, specs[0])

        def animated(specs=specs, model=model):
            for spec in specs:
                r.render(model, spec)

        anim_ms = best(rounds, animated) / len(specs) * 1e3
        still_ms = best(rounds, r.render, model, specs[0]) * 1e3
        prog = prog or build_program(FLOOR_VS, FLOOR_FS, label="floor")
        gpu = r._gpu(model, specs[0])
        cam = resolve_camera("auto", model, seq)
        mvp = (cam.projection(1.0) @ cam.view()).astype(np.float32)
        fb = Framebuffer(size, size)  # kept for the rounds, as the renderer keeps its own
        draw_floor(gpu, prog, mvp, size, fb)
        floor_ms = best(rounds, draw_floor, gpu, prog, mvp, size, fb) * 1e3
        fb.delete()
        print(f"{p.stem[:26]:26s} {anim_ms:8.2f}m {still_ms:7.2f}m {floor_ms:8.2f}m {anim_ms / floor_ms:9.2f}x")
        r.forget(model)
    r.close()


if __name__ == "__main__":
    sys.exit(main())
