"""mdx-m3-viewer in headless Chromium, for the benches that compare us with it (bench/fidelity.py,
bench/peer.py): bundling a page script with the viewer's source, serving it and a model's folder, and
the job a page script reads.

Building (`build`): in a scratch folder outside this repository the viewer's `src/` is copied, `npm
install` fetches esbuild and the viewer's runtime dependencies, and esbuild bundles one of our page
scripts (`bench/*_harness.ts`, which import the viewer through `bench/viewer_page.ts`). Nothing of the
viewer is written into the repository.

Serving (`served`): the bundle's page, /m/<path> from the model's folder, textures the viewer asks for
that are not there answered with what our asset search (`renderer.assets.search.AssetSearch`) finds for
the model, and the viewer's team colour / glow textures (game data) as BLPs made from our built-in team
tables, so both renderers draw the same files. The page reads its job from `window.JOB` (`page_url`).
"""

from __future__ import annotations

import contextlib
import http.server
import itertools
import json
import shutil
import struct
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VIEWER_STEP_MS = 1000 / 60  # the viewer advances time in frames of 1000/60 ms (ModelViewer.update's default)
CORPUS = ROOT.parent / "shared" / "corpus"
SHARED_TS = BENCH / "viewer_page.ts"  # imported by every page script
NPM_PACKAGES = ["esbuild", "gl-matrix@3.3.0", "events", "pako", "tga-js", "fengari"]
PAGE = """<!doctype html><meta charset="utf-8"><body style="margin:0">
<script>window.JOB = JSON.parse(decodeURIComponent(location.hash.slice(1)));</script>
<script src="/{script}"></script>"""


def build(source: Path, scratch: Path, entry: Path, out_name: str) -> Path:
    """Bundle the viewer and our page script `entry` into `scratch`/`out_name`; returns its path."""
    if not (source / "src" / "viewer" / "viewer.ts").is_file():
        raise SystemExit(f"{source} does not hold the viewer's src/ (src/viewer/viewer.ts)")
    if ROOT in scratch.resolve().parents or scratch.resolve() == ROOT:
        raise SystemExit("the scratch folder must be outside the repository")
    scratch.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(scratch / "viewer", ignore_errors=True)
    shutil.copytree(source / "src", scratch / "viewer" / "src")
    for script in (SHARED_TS, entry):
        shutil.copy(script, scratch / script.name)
    if not (scratch / "node_modules" / ".bin" / "esbuild").exists():
        if not (scratch / "package.json").exists():
            subprocess.run(["npm", "init", "-y"], cwd=scratch, check=True, capture_output=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", *NPM_PACKAGES], cwd=scratch, check=True)
    out = scratch / out_name
    subprocess.run([str(scratch / "node_modules" / ".bin" / "esbuild"), entry.name, "--bundle", "--format=iife",
                    f"--outfile={out.name}"], cwd=scratch, check=True)
    return out


def add_bundle_arguments(ap, out_name: str, scratch: str) -> None:
    """The options `ready_bundle` reads: --build-from, --bundle (a built `out_name`) and --scratch."""
    ap.add_argument("--build-from", type=Path, help="the viewer's source (a folder holding src/)")
    ap.add_argument("--bundle", type=Path, help=f"a {out_name} built before (by --build-from)")
    ap.add_argument("--scratch", type=Path, default=Path(scratch))


def ready_bundle(args, entry: Path, out_name: str) -> Path | None:
    """The bundle a bench drives: built from `args.build_from` into `args.scratch` (`build`), else the
    one `args.bundle` names. None, with the reason on stderr, when headless Chromium cannot run or no
    bundle is given (the bench then exits with 2)."""
    import browser as chromium  # tests/browser.py: the caller puts tests/ on sys.path

    why = chromium.available()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return None
    bundle = build(args.build_from, args.scratch, entry, out_name) if args.build_from else args.bundle
    if bundle is None or not Path(bundle).is_file():
        print(f"give --build-from SRC (or --bundle {out_name})", file=sys.stderr)
        return None
    return Path(bundle)


def corpus_models(corpus: Path, names: list[str]) -> list[Path]:
    """The first `<name>.mdx` (by path) under `corpus` of each name found there, in the order of `names`."""
    found: dict[str, Path] = {}
    if corpus.is_dir():
        for path in sorted(corpus.rglob("*.mdx")):
            if path.stem in names and path.stem not in found:
                found[path.stem] = path
    return [found[name] for name in names if name in found]


TEAM_PATHS = {"ReplaceableTextures/TeamColor/TeamColor": 1, "ReplaceableTextures/TeamGlow/TeamGlow": 2}


def blp1_paletted(rgba: np.ndarray) -> bytes:
    """A BLP1 (paletted, 8-bit alpha, one level) of an image with at most 256 colours."""
    h, w = rgba.shape[:2]
    colours, index = np.unique(rgba[..., :3].reshape(-1, 3), axis=0, return_inverse=True)
    if len(colours) > 256:
        raise ValueError("more than 256 colours")
    palette = np.zeros((256, 4), np.uint8)
    palette[: len(colours), :3] = colours[:, ::-1]  # B, G, R
    offset = 156 + 1024
    pixels = index.astype(np.uint8).tobytes() + rgba[..., 3].astype(np.uint8).tobytes()
    head = struct.pack("<4s6I", b"BLP1", 1, 8, w, h, 4, 0)
    return head + struct.pack("<16I", offset, *[0] * 15) + struct.pack("<16I", len(pixels), *[0] * 15) + \
        palette.tobytes() + pixels


def team_texture(path: str) -> bytes | None:
    """The BLP the viewer asks for a team colour / glow (game data it has no other source for),
    made from our built-in team tables, so team-coloured models can be compared."""
    from renderer.formats.textures import team_color_texture, team_glow_texture

    for prefix, rid in TEAM_PATHS.items():
        if path.startswith(prefix) and path.endswith(".blp") and path[len(prefix):-4].isdigit():
            team = int(path[len(prefix):-4])
            return blp1_paletted((team_color_texture if rid == 1 else team_glow_texture)(team))
    return None


def team_assets(model, folder: Path) -> tuple[str, ...]:
    """The team colour / glow BLPs the server answers the viewer with (`team_texture`) for the texture
    paths `model` names, written under `folder` as an asset root for our renderer (FrameSpec.assets), so
    that both renderers draw the same files for a path such as ReplaceableTextures\\TeamGlow\\TeamGlow06.blp
    (replaceable ids 1 and 2 use the same tables on both sides already). () when it names none."""
    written = False
    for texture in model.textures:
        rel = texture.path.replace("\\", "/")
        data = team_texture(rel)
        if data is not None:
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            written = True
    return (str(folder),) if written else ()


class _Files(http.server.SimpleHTTPRequestHandler):
    """The bundles and pages from the bundle's folder; /m/<path> from the model folder, and the team
    colour / glow BLPs (`team_texture`)."""

    bundle: Path
    models: Path
    search = None  # the model's renderer.assets.search.AssetSearch: textures the viewer asks for

    def do_GET(self) -> None:
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        data = None
        if path.startswith("/m/"):
            data = team_texture(path[3:])
            direct = Path(self.translate_path(self.path))
            if data is None and not direct.is_file() and self.search is not None:
                asset = self.search.find(path[3:])
                data = asset.data if asset is not None else None
        if data is None:
            return super().do_GET()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def translate_path(self, path: str) -> str:
        path = urllib.parse.unquote(urllib.parse.urlsplit(path).path)
        if path.startswith("/m/"):
            target = (self.models / path[3:]).resolve()
            if self.models.resolve() in target.parents:
                return str(target)
            return str(self.models / "__outside__")
        return str(self.bundle.parent / path.lstrip("/"))

    def log_message(self, *args) -> None:
        pass


def page_name(bundle: Path) -> str:
    """The page that runs `bundle` (written next to it by `serve`)."""
    return f"{bundle.stem}.html"


def serve(bundle: Path, models: Path, search=None) -> tuple[http.server.ThreadingHTTPServer, int]:
    (bundle.parent / page_name(bundle)).write_text(PAGE.format(script=bundle.name))
    handler = type("Files", (_Files,), {"bundle": bundle, "models": models, "search": search})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


@contextlib.contextmanager
def served(bundle: Path, model, path: Path):
    """The port of a server for `bundle` and the folder of the model (loaded from `path`), textures
    missing there found by the model's asset search; shut down on leaving."""
    from renderer.assets.search import AssetSearch, ModelLocation

    search = AssetSearch.for_model(ModelLocation.from_path(model.path))
    server, port = serve(Path(bundle).resolve(), Path(path).resolve().parent, search)
    try:
        yield port
    finally:
        server.shutdown()
        server.server_close()


def camera_job(rel: str, size: int, cam, seq: int | None, background: str) -> dict:
    """What viewer_page.ts's openModel reads: the model's URL, the canvas size, our camera (eye, target,
    up, field of view, clip planes), the sequence (-1: none) and the opaque background as RGB 0..1."""
    rgb = [int(background[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    return {"model": f"/m/{rel}", "size": size, "eye": list(cam.eye), "target": list(cam.target),
            "up": list(cam.up), "fov_deg": cam.fov_deg, "near": cam.near, "far": cam.far,
            "sequence": -1 if seq is None else seq, "background": rgb}


_LOADS = itertools.count()


def page_url(port: int, bundle: Path, job: dict) -> str:
    """The page of `bundle` with `job` in its fragment, and a query of its own: a URL that differs from
    the one before only in its fragment is not loaded again (the old page and its window.* would stay)."""
    return (f"http://127.0.0.1:{port}/{page_name(Path(bundle))}?load={next(_LOADS)}#"
            + urllib.parse.quote(json.dumps(job)))
