"""Asset lookup on the corpus: how many textures of the models inside maps are found, and reading
the same textures from an archive vs from a folder.

    .venv/bin/python bench/assets.py                 # both parts
    .venv/bin/python bench/assets.py --coverage      # found / asked only
    .venv/bin/python bench/assets.py --timing        # archive / folder ratio only (needs smpq)

Coverage: every *.mdx / *.mdl under a map root of the corpus (a *.w3x / *.w3m folder, or a folder
holding war3map* entries; `renderer.assets.search`), each texture path the model names (team
colour/glow and other replaceable ids without a path are not asked). "before" is what `farm render`
does without flags on main before issue 13: `TextureResolver([], model_folder)` (the model's folder,
then the basename there); "after" is `AssetSearch.for_model(...)` with no asset roots, no game data
and no stop root (the model's folder and those above it up to the map root).

Timing: each corpus map folder is packed into an MPQ (smpq, zlib) in a temporary folder; the
textures the folder search finds are then looked up and read through a fresh `AssetSearch` over
the folder form and over the archive form (`maps/x.w3x:entry` models), best of --rounds rounds,
each round >= --min-round s. Ratio = archive time / folder time (goal <= 1.2). Steady state: the
folder's files are in the OS page cache and the archive's entries in its decompressed-entry cache
(`renderer.assets.mpq.ENTRY_CACHE_BYTES`); "cold" reopens the archives before every pass, so every
entry is decompressed again (zlib inflate dominates that number).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from renderer.assets.search import AssetSearch, ModelLocation, is_map_folder  # noqa: E402
from renderer.assets.trees import AssetFolder  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
MODEL_GLOBS = ("*.mdx", "*.mdl", "*.MDX", "*.MDL")


def map_roots(corpus: Path) -> list[Path]:
    """Every map root under the corpus (outermost first: a map inside a map is not listed again)."""
    roots: list[Path] = []
    for d in sorted(p for p in corpus.rglob("*") if p.is_dir()):
        if any(d.is_relative_to(r) for r in roots):
            continue
        store = AssetFolder(d.parent)
        if is_map_folder(store, (d.name,)):
            roots.append(d)
    return roots


def models_in(root: Path) -> list[Path]:
    return sorted({p for g in MODEL_GLOBS for p in root.rglob(g) if p.is_file()})


def texture_paths(model_path: Path) -> list[str]:
    from renderer.formats import load_model

    model = load_model(model_path)
    return [str(t.path) for t in model.textures if str(t.path)]


def coverage(corpus: Path) -> dict:
    from renderer.formats.textures import TextureResolver

    rows = []
    for root in map_roots(corpus):
        for m in models_in(root):
            try:
                paths = texture_paths(m)
            except Exception as e:  # noqa: BLE001
                rows.append((m, None, None, 0, str(e)))
                continue
            before = sum(TextureResolver([], m.parent).resolve(p)[0] is not None for p in paths)
            search = AssetSearch.for_model(ModelLocation(folder=m.parent))
            after = sum(search.find(p) is not None for p in paths)
            rows.append((m, before, after, len(paths), ""))
    asked = sum(r[3] for r in rows)
    b = sum(r[1] or 0 for r in rows)
    a = sum(r[2] or 0 for r in rows)
    for m, before, after, n, err in rows:
        rel = m.relative_to(corpus)
        print(f"  {rel}: " + (f"failed to load: {err}" if err else f"before {before}/{n}, after {after}/{n}"))
    print(f"coverage: {len(rows)} models in {len(map_roots(corpus))} maps; textures found before {b}/{asked}, "
          f"after {a}/{asked}")
    return {"models": len(rows), "asked": asked, "before": b, "after": a}


def _best(fn, rounds: int, min_round: float) -> float:
    passes = 1
    while True:
        t = time.perf_counter()
        for _ in range(passes):
            fn()
        if time.perf_counter() - t >= min_round:
            break
        passes *= 2
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(passes):
            fn()
        best = min(best, (time.perf_counter() - t) / passes)
    return best


def timing(corpus: Path, rounds: int, min_round: float) -> dict:
    import mpq_build

    from renderer.assets.trees import close_archives

    why = mpq_build.have_tools()
    if why:
        print(f"timing skipped: {why}")
        return {}
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, root in enumerate(map_roots(corpus)):
            archive = mpq_build.build(root, Path(tmp) / f"map{i}.w3x")
            for m in models_in(root):
                try:
                    paths = texture_paths(m)
                except Exception:  # noqa: BLE001
                    continue
                entry = m.relative_to(root).as_posix()
                folder_loc = ModelLocation(folder=m.parent)
                archive_loc = ModelLocation(archive=archive, entry=entry.replace("/", "\\"))
                found = [p for p in paths if AssetSearch.for_model(folder_loc).find(p) is not None]
                if found:
                    cases.append((folder_loc, archive_loc, found))
        nbytes = 0

        def run(which: int) -> None:
            nonlocal nbytes
            nbytes = 0
            for case in cases:
                search = AssetSearch.for_model(case[which])
                for p in case[2]:
                    nbytes += len(search.find(p).data)

        def cold() -> None:
            close_archives()  # fresh handles, nothing decompressed yet
            run(1)

        folder_s = _best(lambda: run(0), rounds, min_round)
        archive_s = _best(lambda: run(1), rounds, min_round)
        cold_s = _best(cold, rounds, min_round)
        close_archives()
    n = sum(len(c[2]) for c in cases)
    ratio, cold_ratio = archive_s / folder_s, cold_s / folder_s
    print(f"timing: {n} textures ({nbytes / 1e6:.1f} MB) of {len(cases)} models, lookup + read per pass: "
          f"folder {folder_s * 1e3:.2f} ms, archive {archive_s * 1e3:.2f} ms (archive/folder = {ratio:.2f}); "
          f"archive opened and every entry decompressed again each pass: {cold_s * 1e3:.2f} ms "
          f"(cold archive/folder = {cold_ratio:.2f})")
    return {"textures": n, "bytes": nbytes, "folder_s": folder_s, "archive_s": archive_s, "ratio": ratio,
            "cold_s": cold_s, "cold_ratio": cold_ratio}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--coverage", action="store_true")
    ap.add_argument("--timing", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-round", type=float, default=0.3)
    args = ap.parse_args(argv)
    both = not (args.coverage or args.timing)
    if args.coverage or both:
        coverage(args.corpus)
    if args.timing or both:
        timing(args.corpus, args.rounds, args.min_round)
    return 0


if __name__ == "__main__":
    sys.exit(main())
