"""Particle / ribbon simulation cost: fast-forwarding to t = 10 s, and a batch against separate renders.

The model is the corpus' heaviest emitter model, picked by its expected live load: the sum over its
PRE2 emitters of rate x lifespan (x2 for head-and-tail emitters), RIBB emitters of rate x lifespan
and PREM emitters of rate x lifespan, at their static values. Everything is measured side by side in
one run (best of --rounds):

  * fast-forward: a fresh simulation stepped from its window start to 10 s (`Effects.at`, CPU only), and a full
    frame at 10 s rendered from a fresh simulation, against the same frame rendered again once the
    simulation is there (the cost of the frame itself): ratio = how many frames a cold 10 s costs.
  * batch: 20 increasing timestamps (every 500 ms up to 10 s) rendered as one batch (one simulation
    carried along) against the same 20 rendered separately (each fresh, `reset_effects` before
    each, as a fresh worker would). The bytes are checked to be identical; ratio = separate / batch.
  * far timestamps: a cold simulation and a cold frame at --time (default 10 s) against the same at
    --far (default 10^12 ms); under the window rule (`renderer.fx.window`) both cost the window's
    steps, so the ratio far / near should be about 1.

    .venv/bin/python bench/fx.py [--size 256] [--rounds 3] [--model path/to/model.mdx --sequence Stand]
                                 [--time 10000] [--far 1000000000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from renderer.anim import Animator  # noqa: E402
from renderer.errors import FormatError  # noqa: E402
from renderer.formats import load_model  # noqa: E402
from renderer.frame import FrameSpec, Renderer, model_hash, resolve_sequence  # noqa: E402
from renderer.fx import STEP_MS, Effects  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
TEN_S = 10_000
BATCH = [500 * (k + 1) for k in range(20)]


def load(model) -> float:
    total = 0.0
    for e in model.particle_emitters2:
        total += max(e.emission_rate, 0) * max(e.lifespan, 0) * (2 if e.head_or_tail == 2 else 1)
    for e in model.ribbon_emitters:
        total += max(e.emission_rate, 0) * max(e.lifespan, 0)
    for e in model.particle_emitters:
        total += max(e.emission_rate, 0) * max(e.lifespan, 0)
    return float(np.nan_to_num(total))


def heaviest() -> tuple[Path, object]:
    best = None
    for path in sorted(CORPUS.rglob("*.mdx")):
        try:
            model = load_model(path)
        except (FormatError, ValueError, OSError):
            continue
        score = load(model)
        if best is None or score > best[0]:
            best = (score, path, model)
    if best is None:
        sys.exit(f"no loadable model with emitters under {CORPUS}")
    return best[1], best[2]


def stand(model) -> int | None:
    names = [s.name.lower() for s in model.sequences]
    return names.index("stand") if "stand" in names else resolve_sequence(model, None)


def timed(rounds: int, fn) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--sequence")
    ap.add_argument("--time", type=int, default=TEN_S, help="the near timestamp in ms (default 10000)")
    ap.add_argument("--far", type=int, default=10**12, help="the far timestamp in ms (default 10^12)")
    args = ap.parse_args()

    if args.model:
        path, model = args.model, load_model(args.model)
    else:
        path, model = heaviest()
    seq = resolve_sequence(model, args.sequence) if args.sequence else stand(model)
    print(f"model: {path.relative_to(CORPUS) if CORPUS in path.parents else path}")
    print(f"  emitters: PRE2 {len(model.particle_emitters2)}, RIBB {len(model.ribbon_emitters)}, "
          f"PREM {len(model.particle_emitters)}; load (sum rate x lifespan) {load(model):.0f}; "
          f"sequence {None if seq is None else model.sequences[seq].name!r}; step {STEP_MS} ms; "
          f"{args.size}x{args.size}, best of {args.rounds}")

    digest = model_hash(model)
    animator = Animator(model)

    def simulate_cold():
        Effects().at(model, animator, seq, TEN_S, 0, digest, None)

    sim_s = timed(args.rounds, simulate_cold)
    sim = Effects().at(model, animator, seq, TEN_S, 0, digest, None)
    live = sum(len(e.particles) for e in sim.pre2 + sim.prem) + sum(len(r.trail) for r in sim.ribbons)

    renderer = Renderer()
    spec = lambda t: FrameSpec(sequence=seq, time_ms=t, width=args.size, height=args.size,  # noqa: E731
                               missing_textures="white", background="#000000")
    renderer.render(model, spec(0))  # context, programs, textures

    def render_cold():
        renderer.reset_effects()
        renderer.render(model, spec(TEN_S))

    cold_s = timed(args.rounds, render_cold)
    renderer.render(model, spec(TEN_S))
    warm_s = timed(args.rounds, lambda: renderer.render(model, spec(TEN_S)))
    steps = int((TEN_S - sim.start_ms) // STEP_MS)
    print(f"fast-forward to {TEN_S / 1000:g} s (from the window start {sim.start_ms:g} ms: {steps} steps, "
          f"{live} live particles/edges):")
    print(f"  simulation only    {sim_s * 1000:8.1f} ms  ({sim_s / max(steps, 1) * 1e6:.0f} us per step)")
    print(f"  cold frame at 10 s {cold_s * 1000:8.1f} ms")
    print(f"  same frame, warm   {warm_s * 1000:8.1f} ms")
    print(f"  ratio cold / warm  {cold_s / warm_s:8.1f}x")

    batch_frames: list[bytes] = []

    def batch():
        renderer.reset_effects()
        batch_frames[:] = [renderer.render(model, spec(t)).rgba.tobytes() for t in BATCH]

    separate_frames: list[bytes] = []

    def separate():
        separate_frames.clear()
        for t in BATCH:
            renderer.reset_effects()
            separate_frames.append(renderer.render(model, spec(t)).rgba.tobytes())

    batch_s = timed(args.rounds, batch)
    separate_s = timed(args.rounds, separate)
    same = batch_frames == separate_frames
    print(f"{len(BATCH)} timestamps ({BATCH[0]} .. {BATCH[-1]} ms):")
    n = len(BATCH)
    print(f"  batch (one simulation)   {batch_s * 1000:8.1f} ms  ({batch_s / n * 1000:.1f} ms per frame)")
    print(f"  separate (each fresh)    {separate_s * 1000:8.1f} ms  ({separate_s / n * 1000:.1f} ms per frame)")
    print(f"  ratio separate / batch   {separate_s / batch_s:8.1f}x   identical bytes: {same}")

    near, far = args.time, args.far
    compiled = Effects().compiled(model, animator)
    print(f"far timestamps (window {compiled.window_ms:g} ms):")
    cost = {}
    for t in (near, far):
        sim_t = timed(args.rounds, lambda t=t: Effects().at(model, animator, seq, t, 0, digest, None))

        def frame_cold(t=t):
            renderer.reset_effects()
            renderer.render(model, spec(t))

        cost[t] = (sim_t, timed(args.rounds, frame_cold))
        print(f"  t = {t:>16} ms   simulation {sim_t * 1000:8.1f} ms   cold frame {cost[t][1] * 1000:8.1f} ms")
    print(f"  ratio far / near         simulation {cost[far][0] / cost[near][0]:6.2f}x   "
          f"cold frame {cost[far][1] / cost[near][1]:6.2f}x")
    renderer.close()
    if not same:
        sys.exit("batch and separate renders differ")


if __name__ == "__main__":
    main()
