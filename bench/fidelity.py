"""Fidelity against mdx-m3-viewer: the same frame rendered by the viewer (headless Chromium) and by
us, compared with SSIM.

    .venv/bin/python bench/fidelity.py --build-from /path/to/mdx-m3-viewer   # bundle, then compare
    .venv/bin/python bench/fidelity.py --bundle /tmp/modelfarm-fidelity/harness.js [MODEL ...]

Building (`--build-from`, a checkout or export of the viewer that holds `src/`): in a scratch folder
outside this repository (`--scratch`, default /tmp/modelfarm-fidelity) the viewer's `src/` is copied,
`npm install` fetches esbuild and the viewer's runtime dependencies, and esbuild bundles
`bench/fidelity_harness.ts` (our page script, which imports the viewer) into `harness.js`
(`bench/viewer.py`, shared with `bench/peer.py`). Nothing
of the viewer is written into the repository.

Each model (default: the committed golden models) is rendered at `--size` with our auto camera, the
first sequence at `--time` ms, an opaque `--background`, and the viewer's lighting rule, by both
renderers; the viewer gets the same eye, target, up, field of view and clip planes. The viewer's
texture requests are answered with what our asset search finds for the model (bench/viewer.py), and
both sides draw white for anything missing (the viewer's fallback). Prints SSIM (farm.ssim) per model
and the mean, over the whole frame and over the model's pixels only (where either frame is not the
background); `--lighting farm-v0` measures our old lighting rule; `--out DIR` keeps both PNGs.
The viewer's team colour / glow textures (game data) are served as BLPs made from our built-in team
tables (team 0), and a model's texture paths to those files get the same BLPs on our side
(`viewer.team_assets`). Limits: particles are seeded differently, and WebGL runs on Chromium's
software renderer (SwiftShader) while ours runs on Mesa.

`--animated` (issue 28 item 4): emitters advancing on both sides. The viewer is advanced the way its
own particle tests advance it (bench/viewer_page.ts stepLikeTests, after the viewer's
clients/tests/unittester.js): time t becomes N = round(t / (1000/60)) updates of exactly 1000/60 ms,
N - 1 plain updates then one update-and-render (N = 0: one update with a zero step), with Math.random
replaced by the viewer's seededRandom(6); the instance plays the first sequence from its start with
loop mode 0 (as ours). We render at N x 1000/60 ms, rounded to whole ms. The layouts are seeded
differently, so per model (default: the corpus' emitter models found under ../shared/corpus, OrcMale
for a model without emitters, the sample effects.mdx and `PROBES`, effects.mdx's flame made
deterministic) and time (`--times`) this compares what does not depend on the layout:

* live particles and ribbon edges after the last update, ours (`Renderer.effects.last_stats`: PRE2 and
  PREM quads and PREM child models, ribbon strip edges; rates x1, `renderer.rules`
  PRE2_EMISSION_RATE_SCALE / RIBBON_EMISSION_RATE_SCALE) against the viewer as shipped (static PRE2 and
  ribbon rates x2, its SETTING_PARTICLES_HIGH) and like for like (those rates divided back in the page);
* the particle pixels: pixels whose RGB differs by more than `PARTICLE_TOLERANCE` from the same frame
  rendered with emitters off (each side against its own), as a share of the frame (coverage), their
  bounding box and the mean RGB of the frame there; the viewer's like for like, and its coverage as
  shipped; the coverage's spread over `--seeds` seeds of each side (ours: instance seeds, the viewer:
  seeds 6, 7, ...);
* SSIM of the emitters-off frames (the animated geometry at the same time; on the model's pixels), and of
  the frames themselves where neither side has particle pixels.

`--json F` writes every row; `--out DIR` keeps the PNGs.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

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
    team_assets,
)

HARNESS = Path(__file__).resolve().parent / "fidelity_harness.ts"
# --animated: the corpus models with emitters (PRE2, ribbons), and OrcMale, which has none (SSIM)
ANIMATED_MODELS = ["DarionMograineEvil", "LargeFireEmitter", "Ghost", "Sweep_Fire_Large", "WaterTornado",
                   "DustEmitter", "PixieDustEmitter", "WeaponMagicFlatEmitter", "TeamcolorWispShimmer",
                   "ET_Barrel01", "emitter2_dynamic_visibility", "!RibbonEmitter", "OrcMale"]
ANIMATED_TIMES = "0,250,500,1000,2000,4000"
PARTICLE_TOLERANCE = 2  # a particle pixel: some RGB channel differs by more than this from emitters off
VIEWER_TEST_SEED = 6  # the seed of the viewer's own tests (viewer_page.ts TEST_SEED)


def ours(model, args, assets: tuple = ()):
    from renderer.camera import resolve_camera
    from renderer.frame import FrameSpec, Renderer, resolve_sequence

    r = Renderer()
    seq = resolve_sequence(model, None)
    cam = resolve_camera("auto", model, seq, 1.0)
    spec = FrameSpec(time_ms=args.time, width=args.size, height=args.size, background=args.background,
                     missing_textures="white", lighting=args.lighting, assets=assets)
    frame = r.render(model, spec)
    r.close()
    return frame.rgba, cam, seq


def viewer_frame(browser, port: int, rel: str, cam, seq, args, **extra) -> tuple[np.ndarray, dict]:
    """The viewer's frame (RGBA) and the rest of what its page left (fidelity_harness.ts: `alive`, `steps`,
    `frame_ms`), for `args.time` ms of the sequence or the job fields in `extra`."""
    from PIL import Image

    job = camera_job(rel, args.size, cam, seq, args.background)
    job.update({"time_ms": args.time, **extra})
    browser.get(page_url(port, args.bundle_path, job))
    out = browser.wait_for("return window.FIDELITY || null", timeout=args.timeout)
    if "error" in out:
        raise RuntimeError(out["error"])
    data = base64.b64decode(out.pop("png").split(",", 1)[1])
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA")), out


def emitter_switch():
    """Our Renderer with a switch for its effects pass: `emitters = False` draws the same frame (the same
    pose, camera and simulation) without particles and ribbons."""
    from renderer.frame import Renderer

    class EmitterSwitch(Renderer):
        emitters = True

        def _draw_effects(self, fx, gpu, pose, draw) -> None:
            if self.emitters:
                super()._draw_effects(fx, gpu, pose, draw)

    return EmitterSwitch()


def particle_pixels(on: np.ndarray, off: np.ndarray) -> dict:
    """What the emitters drew into a frame, against the same frame with emitters off: the particle pixels
    (some RGB channel differs by more than PARTICLE_TOLERANCE), their count, share of the frame, bounding
    box [x0, y0, x1, y1] (inclusive, y down) and the frame's mean RGB over them."""
    mask = np.abs(on[..., :3].astype(int) - off[..., :3].astype(int)).max(axis=2) > PARTICLE_TOLERANCE
    if not mask.any():
        return {"pixels": 0, "coverage": 0.0, "bbox": None, "mean_rgb": None}
    ys, xs = np.nonzero(mask)
    return {"pixels": int(mask.sum()), "coverage": float(mask.mean()),
            "bbox": [int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())],
            "mean_rgb": [round(float(v), 1) for v in on[..., :3][mask].mean(axis=0)]}


def bbox_iou(a, b) -> float | None:
    """Intersection over union of two inclusive pixel boxes (None when either is missing)."""
    if a is None or b is None:
        return None
    w = min(a[2], b[2]) - max(a[0], b[0]) + 1
    h = min(a[3], b[3]) - max(a[1], b[1]) + 1
    inter = max(w, 0) * max(h, 0)
    area = (a[2] - a[0] + 1) * (a[3] - a[1] + 1) + (b[2] - b[0] + 1) * (b[3] - b[1] + 1) - inter
    return inter / area


def ssim_pair(a: np.ndarray, b: np.ndarray, background: str) -> dict:
    """SSIM of two frames over the whole frame and over the model's pixels (`model_pixels`)."""
    from farm.compare.ssim import ssim

    value, smap = ssim(a[..., :3], b[..., :3], full=True)
    covered = model_pixels(a, b, background)
    return {"whole": float(value), "on_model": float(smap[covered].mean()) if covered.any() else None}


def counts(alive: dict) -> tuple[int, int]:
    """(live particles, ribbon edges) of the viewer's `alive`."""
    return int(alive.get("particles", 0)), int(alive.get("ribbons", 0))


def animated_row(b, port: int, r, model, path: Path, seq, cam, t: int, args, assets: tuple) -> dict:
    """One model at one time, both sides, emitters on (the viewer as shipped and like for like) and off;
    the particle-pixel coverage again for `args.seeds` - 1 more instance seeds of ours and random seeds of
    the viewer (like for like), for the spread that is the layout's."""
    from dataclasses import replace

    from renderer.frame import FrameSpec

    steps = round(t / VIEWER_STEP_MS)
    ours_ms = round(steps * VIEWER_STEP_MS)
    spec = FrameSpec(time_ms=ours_ms, width=args.size, height=args.size, background=args.background,
                     missing_textures="white", lighting=args.lighting, assets=assets)
    r.emitters = False
    mine_off = r.render(model, spec).rgba
    r.emitters = True
    mine = r.render(model, spec).rgba
    stats = r.effects.last_stats
    ours_live = (int(stats.get("particles", 0)) + int(stats.get("children", 0)), int(stats.get("ribbon_edges", 0)))
    ours_cover = [particle_pixels(r.render(model, replace(spec, instance_seed=k)).rgba, mine_off)["coverage"]
                  for k in range(1, args.seeds)]
    job = {"time_ms": t, "animated": True}
    shipped, out_shipped = viewer_frame(b, port, path.name, cam, seq, args, **job)
    theirs, out = viewer_frame(b, port, path.name, cam, seq, args, file_rates=True, **job)
    theirs_off, _ = viewer_frame(b, port, path.name, cam, seq, args, file_rates=True, emitters=False, **job)
    theirs_cover = [particle_pixels(viewer_frame(b, port, path.name, cam, seq, args, file_rates=True,
                                                 seed=VIEWER_TEST_SEED + k, **job)[0], theirs_off)["coverage"]
                    for k in range(1, args.seeds)]
    ours_px, theirs_px = particle_pixels(mine, mine_off), particle_pixels(theirs, theirs_off)
    ours_cover.append(ours_px["coverage"])
    theirs_cover.append(theirs_px["coverage"])
    row = {"model": path.stem, "ms": t, "steps": int(out["steps"]), "ours_ms": ours_ms,
           "viewer_frame_ms": round(float(out["frame_ms"]), 2),
           "live_ours": ours_live, "live_viewer_shipped": counts(out_shipped.get("alive") or {}),
           "live_viewer": counts(out.get("alive") or {}),
           "ours": ours_px, "viewer": theirs_px,
           "ours_coverage_range": [min(ours_cover), max(ours_cover)],
           "viewer_coverage_range": [min(theirs_cover), max(theirs_cover)],
           "viewer_shipped_coverage": particle_pixels(shipped, theirs_off)["coverage"],
           "bbox_iou": bbox_iou(ours_px["bbox"], theirs_px["bbox"]),
           "ssim_emitters_off": ssim_pair(mine_off, theirs_off, args.background),
           "ssim": (ssim_pair(mine, theirs, args.background) if not ours_px["pixels"] and not theirs_px["pixels"]
                    else None)}
    if args.out:
        from PIL import Image

        args.out.mkdir(parents=True, exist_ok=True)
        for name, im in (("ours", mine), ("ours.off", mine_off), ("viewer", theirs), ("viewer.off", theirs_off),
                         ("viewer.shipped", shipped)):
            Image.fromarray(im).save(args.out / f"{path.stem}.{t}.{name}.png")
    return row


ANIMATED_HEADER = (f"{'model':<22}{'ms':>5}{'N':>4}{'v.ms':>6} {'live ours':>9}{'shipped':>9}{'like':>8}"
                   f"  {'cover ours (seeds)':<23}{'like (seeds)':<23}{'shipd':>6}{'IoU':>5}  {'RGB ours':<12}"
                   f"{'like':<12}{'SSIM off':>8}{'SSIM':>7}")


def animated_line(row: dict) -> str:
    def live(c):
        return f"{c[0]}+{c[1]}"

    def rgb(px):
        return " ".join(str(round(v)) for v in px["mean_rgb"]) if px["mean_rgb"] else "-"

    def num(v, fmt):
        return format(v, fmt) if v is not None else "-"

    def cover(value, spread):
        return f"{value:.4f} ({spread[0]:.4f}-{spread[1]:.4f})"

    return (f"{row['model'][:21]:<22}{row['ms']:>5}{row['steps']:>4}{row['viewer_frame_ms']:>6.0f} "
            f"{live(row['live_ours']):>9}{live(row['live_viewer_shipped']):>9}{live(row['live_viewer']):>8}  "
            f"{cover(row['ours']['coverage'], row['ours_coverage_range']):<23}"
            f"{cover(row['viewer']['coverage'], row['viewer_coverage_range']):<23}"
            f"{row['viewer_shipped_coverage']:>6.4f}{num(row['bbox_iou'], '.2f'):>5}  {rgb(row['ours']):<12}"
            f"{rgb(row['viewer']):<12}{num(row['ssim_emitters_off']['on_model'], '.4f'):>8}"
            f"{num(row['ssim'] and row['ssim']['on_model'], '.4f'):>7}")


def animated(b, models: list[Path], args, scratch: Path) -> list[dict]:
    """Every model at every `--times` ms: `animated_row`s, printed as they come (live counts: particles +
    ribbon edges; 'shipped' the viewer's rates, 'like' its rates divided back to the file's)."""
    from renderer.camera import resolve_camera
    from renderer.formats import load_model
    from renderer.frame import resolve_sequence

    times = [int(t) for t in args.times.split(",")]
    rows = []
    print(ANIMATED_HEADER, flush=True)
    with emitter_switch() as r:
        for path in models:
            path = Path(path).resolve()
            model = load_model(path)
            seq = resolve_sequence(model, None)
            cam = resolve_camera("auto", model, seq, 1.0)
            assets = team_assets(model, scratch / "team" / path.stem)
            with served(args.bundle_path, model, path) as port:
                for t in times:
                    try:
                        rows.append(animated_row(b, port, r, model, path, seq, cam, t, args, assets))
                    except Exception as e:  # noqa: BLE001 - the viewer failed on this model: report, go on
                        print(f"{path.name}: failed at {t} ms: {str(e)[:200]}", flush=True)
                        rows.append({"model": path.stem, "ms": t, "error": str(e)[:500]})
                        break
                    print(animated_line(rows[-1]), flush=True)
            r.forget(model)
    return rows


# Probes: the sample effects.mdx with its flame emitter made deterministic (no spawn area, latitude or
# speed variation; speed 0, or straight up) and its smoke and ribbon removed, so both sides lay the
# particles out alike and what differs is emission timing, ages and quad shapes. Texture 3 is a solid
# colour. name -> the flame's fields replaced.
STILL = {"speed": 0.0, "variation": 0.0, "latitude": 0.0, "gravity": 0.0, "length": 0.0, "width": 0.0}
PROBES = {
    "probe_head": STILL,  # 30/s additive heads at the pivot: quad size, colour, counts
    "probe_grow": {**STILL, "texture_id": 3, "filter_mode": 0, "emission_rate": 3.0, "lifespan": 1.0, "time": 0.5,
                   "segment_scaling": (0.0, 40.0, 70.0), "segment_alphas": (255, 255, 255)},  # size = age
    "probe_tail": {**STILL, "speed": 60.0, "head_or_tail": 1, "tail_length": 0.3, "texture_id": 3,
                   "emission_rate": 5.0},  # tails straight up: tail width
    "probe_both": {**STILL, "speed": 60.0, "head_or_tail": 2, "tail_length": 0.3,
                   "emission_rate": 10.0},  # a head and a tail per emission
}


def probe_models(folder: Path) -> list[Path]:
    """Write the PROBES into `folder` (which holds the sample textures, `write_samples`); their paths."""
    from dataclasses import replace

    from renderer.formats.mdx import save_mdx
    from renderer.samples.build import effects

    paths = []
    for name, fields in PROBES.items():
        model, _ = effects()
        model.particle_emitters2 = [replace(model.particle_emitters2[0], **fields)]
        model.ribbon_emitters = []
        paths.append(folder / f"{name}.mdx")
        save_mdx(model, paths[-1])
    return paths


def animated_models(args, scratch: Path) -> list[Path]:
    """--animated's default models: ANIMATED_MODELS found in the corpus, the sample effects.mdx and PROBES."""
    from renderer.samples import write_samples

    samples = write_samples(scratch / "samples")
    return (corpus_models(args.corpus, ANIMATED_MODELS) + [p for p in samples if p.stem == "effects"]
            + probe_models(scratch / "samples"))


def model_pixels(a: np.ndarray, b: np.ndarray, background: str) -> np.ndarray:
    """Pixels where either frame is not the background (the SSIM over these ignores the empty frame)."""
    bg = np.array([int(background[i:i + 2], 16) for i in (1, 3, 5)])
    return (np.abs(a[..., :3].astype(int) - bg).max(axis=2) > 2) | (np.abs(b[..., :3].astype(int) - bg).max(axis=2) > 2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", type=Path, help="MDX/MDL files (default: goldens/models/*.mdx)")
    add_bundle_arguments(ap, "harness.js", "/tmp/modelfarm-fidelity")
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--time", type=int, default=0)
    ap.add_argument("--background", default="#404040")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--lighting", default="viewer", help="our lighting rule (renderer.rules.LIGHTING_RULES)")
    ap.add_argument("--out", type=Path, help="write ours / viewer PNGs here")
    ap.add_argument("--json", type=Path, help="write the results as JSON")
    ap.add_argument("--animated", action="store_true", help="emitters advancing on both sides: live counts and"
                                                            " particle-pixel statistics at --times, SSIM without"
                                                            " particles (issue 28 item 4)")
    ap.add_argument("--times", default=ANIMATED_TIMES, help="--animated: ms of the first sequence, comma-separated")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="--animated: where the default models are found")
    ap.add_argument("--seeds", type=int, default=5, help="--animated: the coverage's spread over this many seeds"
                                                        " of each side (ours: instance seeds 0..; the viewer: 6..)")
    args = ap.parse_args(argv)

    import browser as chromium

    from farm.compare.ssim import ssim
    from renderer.formats import load_model

    bundle = ready_bundle(args, HARNESS, "harness.js")
    if bundle is None:
        return 2
    args.bundle_path = bundle
    if args.animated:
        with tempfile.TemporaryDirectory(prefix="modelfarm-fidelity-") as tmp, \
                chromium.Browser(timeout=args.timeout) as b:
            rows = animated(b, args.models or animated_models(args, Path(tmp)), args, Path(tmp))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))
        return 0 if any("error" not in row for row in rows) else 1
    models = args.models or sorted((ROOT / "goldens" / "models").glob("*.mdx"))
    results = []
    with tempfile.TemporaryDirectory(prefix="modelfarm-fidelity-") as tmp, \
            chromium.Browser(timeout=args.timeout) as b:
        for path in models:
            path = Path(path).resolve()
            model = load_model(path)
            with served(bundle, model, path) as port:
                mine, cam, seq = ours(model, args, team_assets(model, Path(tmp) / "team" / path.stem))
                try:
                    theirs, _ = viewer_frame(b, port, path.name, cam, seq, args)
                except Exception as e:  # the viewer failed on this model: report, go on
                    results.append({"model": str(path), "error": str(e)[:500]})
                    print(f"{path.name}: viewer failed: {str(e)[:200]}")
                    continue
            value, smap = ssim(mine[..., :3], theirs[..., :3], full=True)
            covered = model_pixels(mine, theirs, args.background)
            on_model = float(smap[covered].mean()) if covered.any() else float("nan")
            results.append({"model": str(path), "ssim": value, "ssim_on_model": on_model,
                            "model_pixels": int(covered.sum())})
            print(f"{path.name}: SSIM {value:.4f}, on the model's {int(covered.sum())} pixels {on_model:.4f}")
            if args.out:
                from PIL import Image

                args.out.mkdir(parents=True, exist_ok=True)
                Image.fromarray(mine).save(args.out / f"{path.stem}.ours.png")
                Image.fromarray(theirs).save(args.out / f"{path.stem}.viewer.png")
    scored = [r["ssim"] for r in results if "ssim" in r]
    if scored:
        on_model = [r["ssim_on_model"] for r in results if "ssim" in r]
        print(f"mean SSIM over {len(scored)} model(s): {np.mean(scored):.4f}, on the models' pixels "
              f"{np.nanmean(on_model):.4f} (lighting {args.lighting})")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if scored else 1


if __name__ == "__main__":
    sys.exit(main())
