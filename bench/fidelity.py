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
renderers; the viewer gets the same eye, target, up, field of view and clip planes. Textures are
found by the viewer's path solver in the model's folder only, so our frame uses the model's folder
too and white for anything missing (the viewer's fallback). Prints SSIM (farm.ssim) per model and
the mean, over the whole frame and over the model's pixels only (where either frame is not the
background); `--lighting farm-v0` measures our old lighting rule; `--out DIR` keeps both PNGs.
The viewer's team colour / glow textures (game data) are served as BLPs made from our built-in team
tables (team 0). Limits: particles are seeded differently, and WebGL runs on Chromium's software
renderer (SwiftShader) while ours runs on Mesa.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.append(str(ROOT / "bench"))

from viewer import VIEWER_STEP_MS, add_bundle_arguments, camera_job, page_url, ready_bundle, served  # noqa: E402

HARNESS = Path(__file__).resolve().parent / "fidelity_harness.ts"


def ours(model, args):
    from renderer.camera import resolve_camera
    from renderer.frame import FrameSpec, Renderer, resolve_sequence

    r = Renderer()
    seq = resolve_sequence(model, None)
    cam = resolve_camera("auto", model, seq, 1.0)
    spec = FrameSpec(time_ms=args.time, width=args.size, height=args.size, background=args.background,
                     missing_textures="white", lighting=args.lighting)
    frame = r.render(model, spec)
    r.close()
    return frame.rgba, cam, seq


def viewer_frame(browser, port: int, rel: str, cam, seq, args, time_ms: int | None = None,
                 step_ms: float = 0.0, alive: dict | None = None) -> np.ndarray:
    """The viewer's frame; with `step_ms`, time advances from the sequence start in the viewer's own
    steps (its emitters simulate) and `alive` receives its live particle and ribbon-edge counts."""
    from PIL import Image

    job = camera_job(rel, args.size, cam, seq, args.background)
    job.update(time_ms=args.time if time_ms is None else time_ms, step_ms=step_ms)
    browser.get(page_url(port, args.bundle_path, job))
    out = browser.wait_for("return window.FIDELITY || null", timeout=args.timeout)
    if "error" in out:
        raise RuntimeError(out["error"])
    data = base64.b64decode(out["png"].split(",", 1)[1])
    if alive is not None:
        alive.update(out.get("alive") or {})
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))


def image_stats(rgba: np.ndarray, background: str) -> tuple[float, np.ndarray]:
    """(share of pixels that are not the background, their mean RGB)."""
    bg = np.array([int(background[i:i + 2], 16) for i in (1, 3, 5)])
    on = np.abs(rgba[..., :3].astype(int) - bg).max(axis=2) > 2
    mean = rgba[..., :3][on].mean(axis=0) if on.any() else np.zeros(3)
    return float(on.mean()), mean


def particles(b, models: list[Path], args) -> int:
    """Particle and ribbon frames differ by their random layout, so compare what can be compared: the
    live particles and ribbon edges, and image statistics (covered share, mean colour), at a few times
    of the first sequence, the viewer stepping 1000/60 ms frames and us our fixed 20 ms steps."""
    from renderer.camera import resolve_camera
    from renderer.formats import load_model
    from renderer.frame import FrameSpec, Renderer, resolve_sequence

    times = [int(t) for t in args.particle_times.split(",")]
    print(f"{'model':<28}{'ms':>6}{'live ours':>11}{'viewer':>8}{'covered ours':>14}{'viewer':>8}"
          f"{'mean RGB ours':>22}{'viewer':>18}")
    for path in models:
        path = Path(path).resolve()
        model = load_model(path)
        with served(args.bundle_path, model, path) as port:
            seq = resolve_sequence(model, None)
            cam = resolve_camera("auto", model, seq, 1.0)
            for t in times:
                with Renderer() as r:
                    spec = FrameSpec(time_ms=t, width=args.size, height=args.size, background=args.background,
                                     missing_textures="white", lighting=args.lighting)
                    mine = r.render(model, spec).rgba
                    ours_live = r.effects.last_stats.get("particles", 0) + r.effects.last_stats.get("ribbon_edges", 0)
                alive: dict = {}
                try:
                    theirs = viewer_frame(b, port, path.name, cam, seq, args, t, VIEWER_STEP_MS, alive)
                except Exception as e:  # noqa: BLE001 - the viewer failed on this model: report, go on
                    print(f"{path.name:<28}{t:>6}  viewer failed: {str(e)[:120]}")
                    break
                (c1, m1), (c2, m2) = image_stats(mine, args.background), image_stats(theirs, args.background)
                theirs_live = int(alive.get("particles", 0)) + int(alive.get("ribbons", 0))
                print(f"{path.name[:27]:<28}{t:>6}{ours_live:>11}{theirs_live:>8}{c1:>14.3f}{c2:>8.3f}"
                      f"{str(np.round(m1).astype(int)):>22}{str(np.round(m2).astype(int)):>18}")
    return 0


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
    ap.add_argument("--particles", action="store_true", help="particle and ribbon models: live counts and image"
                                                             " statistics over time instead of SSIM")
    ap.add_argument("--particle-times", default="500,1000,2000,4000", help="ms of the first sequence to compare")
    args = ap.parse_args(argv)

    import browser as chromium

    from farm.compare.ssim import ssim
    from renderer.formats import load_model

    bundle = ready_bundle(args, HARNESS, "harness.js")
    if bundle is None:
        return 2
    models = args.models or sorted((ROOT / "goldens" / "models").glob("*.mdx"))
    results = []
    args.bundle_path = bundle
    if args.particles:
        with chromium.Browser(timeout=args.timeout) as b:
            return particles(b, models, args)
    with chromium.Browser(timeout=args.timeout) as b:
        for path in models:
            path = Path(path).resolve()
            model = load_model(path)
            with served(bundle, model, path) as port:
                mine, cam, seq = ours(model, args)
                try:
                    theirs = viewer_frame(b, port, path.name, cam, seq, args)
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
