"""Ours against mdx-m3-viewer, the peer a user would otherwise script for headless MDX frames: frames
per second of both, drawn and read back, side by side (issue 27).

    .venv/bin/python bench/peer.py --build-from /path/to/mdx-m3-viewer            # bundle, then measure
    .venv/bin/python bench/peer.py --bundle /tmp/modelfarm-peer/peer.js [MODEL ...] [--sizes 256,512]

Building (`--build-from`, a checkout or export of the viewer that holds `src/`) is bench/viewer.py's:
the viewer's source and `bench/peer_harness.ts` are bundled into `peer.js` in a scratch folder outside
this repository (`--scratch`, default /tmp/modelfarm-peer); nothing of the viewer is committed.

Per model (default: OrcMale, Ghost, Girl2, DarionMograineEvil, LargeFireEmitter and HumanBattleship,
those found under ../shared/corpus; the project's sample models when none is), size (`--sizes`) and
mode, both sides draw the same view (our auto camera, the first sequence, an opaque background, white
for missing textures, textures found by our asset search) and read every frame back: ours
`Renderer.render` (a Frame with its RGBA array), the viewer update + render + `gl.readPixels` of the
whole canvas in its page (headless Chromium, bench/viewer.py's server). Modes:

* still: the frame at the sequence's middle (farm.look.default_time), drawn again and again (the viewer
  first steps there in its own 1000/60 ms frames, so its emitters are alive; then update(0));
* animated: successive frames 1000/60 ms apart from there, emitters simulating on both sides.

The sides alternate within each of `--rounds` rounds (the first side alternates too), each side drawing
the same number of frames, enough for the slower side to take about `--seconds`. The table has, per
side, the median fps (wall clock) and the median CPU time per frame (ours: this process, llvmpipe's
threads included; the viewer: every process below chromedriver, i.e. Chromium's browser, renderer and
GPU processes, SwiftShader's threads included, read from /proc at 10 ms resolution), the medians of
the rounds' ratios (fps ours / viewer and CPU viewer / ours: above 1, we are faster / cheaper), and the
live particles + ribbon edges after the last frame of each side (ours: `renderer.effects.last_stats`;
the viewer doubles the files' static emission rates, its "high particles" setting, so about twice
ours; `--file-rates` undoes that in the page, for like-for-like particle work).
Then the GL stacks: our GL_RENDERER / GL_VERSION, the viewer's unmasked WebGL renderer, its version
and the browser. On a shared machine the wall clock follows the other load (a side waiting for a
core); CPU per frame is the steadier figure, and ratios, not fps, compare across runs.

Ours renders each round's frames as a farm batch does (issue 37): `render(..., then=next)`, the next
frame posed while this one rasterises; `--alone` renders one frame at a time (the path of one-frame
callers). Each row carries the 1-minute load average before and after it; the run ends with both
ratios' median and lowest row, the load seen, and a verdict on issue 37's goal (every row >= 1.1x the
viewer's fps, median >= 2.0x, CPU per frame at most half the viewer's on every row) only when the load
average stayed at or below the core count: on a busier machine it prints "no verdict" instead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.append(str(ROOT / "bench"))

from viewer import (  # noqa: E402
    CORPUS,
    VIEWER_STEP_MS,
    add_bundle_arguments,
    camera_job,
    corpus_models,
    page_url,
    ready_bundle,
    served,
)

HARNESS = Path(__file__).resolve().parent / "peer_harness.ts"
PEER_MODELS = ["OrcMale", "Ghost", "Girl2", "DarionMograineEvil", "LargeFireEmitter", "HumanBattleship"]
MODES = ("still", "animated")


def default_models(corpus: Path, scratch: Path) -> list[Path]:
    """The corpus models of issue 27's table found under `corpus` (the first `<name>.mdx` by path),
    else the project's sample models written into `scratch`."""
    found = corpus_models(corpus, PEER_MODELS)
    if found:
        return found
    from renderer.samples import write_samples

    return write_samples(scratch / "samples")


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) used so far by the processes below `root` (chromedriver: Chromium's
    browser, renderer and GPU processes), read from /proc."""
    parent, used = {}, {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
            parent[int(entry.name)] = int(fields[1])
            used[int(entry.name)] = int(fields[11]) + int(fields[12])
    below, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier and pid not in below}
        below |= frontier
    return sum(used[pid] for pid in below) / os.sysconf("SC_CLK_TCK")


class Ours:
    """Our side of one model at one size: `Renderer.render` of full frames (read back), at the still
    time or advancing 1000/60 ms a frame (`step`)."""

    def __init__(self, renderer, model, size: int, time_ms: int, background: str, alone: bool = False):
        from renderer.frame import FrameSpec

        self.r, self.model, self.t0, self.k, self.alone = renderer, model, time_ms, 0, alone
        self.spec = lambda t: FrameSpec(time_ms=t, width=size, height=size, camera="auto", background=background,
                                        missing_textures="white")
        for _ in range(3):  # warm up: programs, textures, the effects simulation at the still time
            renderer.render(model, self.spec(time_ms))

    def time(self, mode: str, frames: int) -> dict:
        def at(k: int):
            return self.spec(self.t0 + k * VIEWER_STEP_MS if mode == "animated" else self.t0)

        step = 1 if mode == "animated" else 0
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(frames):  # a batch as the farm renders it: the next frame posed while this one rasterises
            self.k += step
            then = None if self.alone or i + 1 == frames else at(self.k + step)
            self.r.render(self.model, at(self.k), then=then)
        fps, cpu_ms = frames / (time.perf_counter() - start), (time.process_time() - cpu) * 1000 / frames
        stats = self.r.effects.last_stats
        return {"fps": fps, "cpu_ms": cpu_ms,
                "alive": int(stats.get("particles", 0)) + int(stats.get("ribbon_edges", 0))}


class Theirs:
    """The viewer's side: the page of peer_harness.ts, loaded for one model and size."""

    def __init__(self, browser, port: int, bundle: Path, job: dict, timeout: float):
        self.b = browser
        browser.get(page_url(port, bundle, job))
        out = browser.wait_for("return window.PEER && (window.PEER.error ? window.PEER : window.PEER.gl)",
                               timeout=timeout)
        if "error" in out:
            raise RuntimeError(out["error"])
        self.gl = out

    def time(self, mode: str, frames: int) -> dict:
        cpu = tree_cpu_s(self.b.proc.pid)
        out = self.b.run("return window.PEER.time(arguments[0], arguments[1])", mode, frames)
        cpu_ms = (tree_cpu_s(self.b.proc.pid) - cpu) * 1000 / frames
        alive = out.get("alive") or {}
        return {"fps": float(out["fps"]), "cpu_ms": cpu_ms,
                "alive": int(alive.get("particles", 0)) + int(alive.get("ribbons", 0))}


def measure(ours: Ours, theirs: Theirs, mode: str, args) -> dict:
    """`args.rounds` rounds of both sides, alternating which goes first; medians and the last counts."""
    probe = max(1.0 / ours.time(mode, 2)["fps"], 1.0 / theirs.time(mode, 2)["fps"])
    frames = max(3, min(args.max_frames, math.ceil(args.seconds / probe)))
    rounds = []
    for i in range(args.rounds):
        sides = (ours, theirs) if i % 2 == 0 else (theirs, ours)
        got = {side: side.time(mode, frames) for side in sides}
        rounds.append((got[ours], got[theirs]))
    return {"frames": frames,
            "ours_fps": statistics.median(o["fps"] for o, _ in rounds),
            "viewer_fps": statistics.median(t["fps"] for _, t in rounds),
            "ratio": statistics.median(o["fps"] / t["fps"] for o, t in rounds),
            "ours_cpu_ms": statistics.median(o["cpu_ms"] for o, _ in rounds),
            "viewer_cpu_ms": statistics.median(t["cpu_ms"] for _, t in rounds),
            "cpu_ratio": statistics.median(t["cpu_ms"] / max(o["cpu_ms"], 1e-9) for o, t in rounds),
            "rounds": [[o["fps"], t["fps"], o["cpu_ms"], t["cpu_ms"]] for o, t in rounds],
            "ours_alive": rounds[-1][0]["alive"], "viewer_alive": rounds[-1][1]["alive"]}


def run_model(browser, renderer, path: Path, args, stacks: dict) -> list[dict]:
    """Every size and mode of one model (one page load per size)."""
    from farm.look import default_time
    from renderer.camera import resolve_camera
    from renderer.formats import load_model
    from renderer.frame import resolve_sequence

    model = load_model(path)
    seq = resolve_sequence(model, None)
    cam = resolve_camera("auto", model, seq, 1.0)
    t0 = default_time(model, seq)
    rows = []
    with served(args.bundle_path, model, path) as port:
        for size in args.size_list:
            job = camera_job(path.name, size, cam, seq, args.background)
            job.update(time_ms=t0, step_ms=VIEWER_STEP_MS, file_rates=args.file_rates)
            theirs = Theirs(browser, port, args.bundle_path, job, args.timeout)
            stacks.setdefault("viewer", theirs.gl)
            ours = Ours(renderer, model, size, t0, args.background, args.alone)
            for mode in MODES:
                load = os.getloadavg()[0]
                got = measure(ours, theirs, mode, args)
                rows.append({"model": path.stem, "size": size, "mode": mode, "time_ms": t0, **got,
                             "load": [load, os.getloadavg()[0]]})
                print(row_line(rows[-1]), flush=True)
        renderer.forget(model)
    return rows


HEADER = f"{'model':<20}{'size':>5} {'mode':<9}{'ours fps':>9}{'viewer':>9}{'ratio':>7}{'ours cpu':>10}{'viewer':>8}" \
    f"{'ratio':>7}{'live us':>8}{'viewer':>8}{'frames':>7}{'load':>6}{'after':>6}"
# issue 37's goal, on a quiet machine: every row's fps ratio, the median's, every row's CPU ratio
GOAL_ROW_FPS, GOAL_MEDIAN_FPS, GOAL_ROW_CPU = 1.1, 2.0, 2.0


def row_line(row: dict) -> str:
    return (f"{row['model'][:19]:<20}{row['size']:>5} {row['mode']:<9}{row['ours_fps']:>9.1f}{row['viewer_fps']:>9.1f}"
            f"{row['ratio']:>7.2f}{row['ours_cpu_ms']:>10.2f}{row['viewer_cpu_ms']:>8.2f}{row['cpu_ratio']:>7.2f}"
            f"{row['ours_alive']:>8}{row['viewer_alive']:>8}{row['frames']:>7}{row['load'][0]:>6.1f}{row['load'][1]:>6.1f}")


def verdict(rows: list[dict], cores: int) -> list[str]:
    """The run's summary: both ratios' median and lowest row, the load average seen, and the verdict on
    issue 37's goal, which is given only when the load average stayed at or below the core count (on
    a busier machine the wall clock measures the other load: the fps figures are not a quiet one's)."""
    fps = sorted(r["ratio"] for r in rows)
    cpu = sorted(r["cpu_ratio"] for r in rows)
    low_fps, low_cpu = min(rows, key=lambda r: r["ratio"]), min(rows, key=lambda r: r["cpu_ratio"])
    peak = max(max(r["load"]) for r in rows)
    out = [f"fps ours / viewer: median {statistics.median(fps):.2f}, lowest {fps[0]:.2f}"
           f" ({low_fps['model']} {low_fps['size']} {low_fps['mode']})",
           f"CPU viewer / ours: median {statistics.median(cpu):.2f}, lowest {cpu[0]:.2f}"
           f" ({low_cpu['model']} {low_cpu['size']} {low_cpu['mode']})",
           f"load average during the run: {min(min(r['load']) for r in rows):.1f} to {peak:.1f} on {cores} cores"]
    if peak > cores:
        out.append(f"no verdict: the machine was busy (load average up to {peak:.1f}, above its {cores} cores);"
                   " these fps ratios are not a quiet machine's")
        return out
    met = fps[0] >= GOAL_ROW_FPS and statistics.median(fps) >= GOAL_MEDIAN_FPS and cpu[0] >= GOAL_ROW_CPU
    out.append(f"verdict: goal {'met' if met else 'NOT met'} (every row >= {GOAL_ROW_FPS}x fps, median >="
               f" {GOAL_MEDIAN_FPS}x, CPU per frame at most 1/{GOAL_ROW_CPU:g} of the viewer's on every row)")
    return out


def print_stacks(stacks: dict) -> None:
    o, v = stacks.get("ours", {}), stacks.get("viewer", {})
    print(f"ours:   GL_RENDERER {o.get('renderer')!r}, GL_VERSION {o.get('version')!r} ({o.get('platform')})")
    if v:
        print(f"viewer: WebGL renderer {v.get('renderer')!r} ({v.get('vendor')}), {v.get('version')!r},"
              f" {v.get('glsl')!r}; {v.get('browser')}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", type=Path, help="MDX/MDL files (default: issue 27's corpus models)")
    add_bundle_arguments(ap, "peer.js", "/tmp/modelfarm-peer")
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--sizes", default="256,512", help="frame sizes, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=0.5, help="about how long the slower side draws a round")
    ap.add_argument("--max-frames", type=int, default=120)
    ap.add_argument("--background", default="#404040")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--file-rates", action="store_true", help="the viewer emits at the files' rates (it doubles"
                                                              " static PRE2 and ribbon rates by default)")
    ap.add_argument("--alone", action="store_true", help="ours renders one frame at a time (no `then`: the"
                                                          " path of one-frame callers)")
    ap.add_argument("--json", type=Path, help="write the results as JSON")
    args = ap.parse_args(argv)
    args.size_list = [int(s) for s in args.sizes.split(",")]

    import browser as chromium

    from renderer.frame import Renderer

    bundle = ready_bundle(args, HARNESS, "peer.js")
    if bundle is None:
        return 2
    args.bundle_path = bundle.resolve()
    with tempfile.TemporaryDirectory(prefix="modelfarm-peer-") as tmp:
        models = [Path(m).resolve() for m in args.models] or default_models(args.corpus, Path(tmp))
        print(HEADER)
        rows, stacks = [], {}
        with chromium.Browser(timeout=args.timeout) as b, Renderer() as r:
            stacks["ours"] = r.gl_info()
            for path in models:
                try:
                    rows += run_model(b, r, path, args, stacks)
                except Exception as e:  # noqa: BLE001 - one model failed on one side: report, go on
                    print(f"{path.name}: failed: {str(e)[:200]}", flush=True)
    print_stacks(stacks)
    summary = verdict(rows, os.cpu_count() or 1) if rows else []
    for line in summary:
        print(line)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "stacks": stacks, "summary": summary}, indent=2))
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
