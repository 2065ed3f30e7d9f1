"""MDX read/write throughput on the corpus, as a ratio against something measured in the same run.

    .venv/bin/python bench/parse.py                                  # ours vs an in-process floor
    .venv/bin/python bench/parse.py --viewer /tmp/viewer-mdlx.js     # ours vs mdx-m3-viewer in Node
    .venv/bin/python bench/parse.py --verbose --profile              # + 5 largest files, cProfile

Method (bench/node_reference.mjs does the same for the JavaScript parser):
  * every *.mdx under the corpus is read from disk once, outside any timing; files that
    read_mdx rejects with FormatError are skipped (and listed);
  * one "pass" reads (or writes) every file of the set once; a round repeats a fixed number of
    passes, found before timing by growing it until a round takes >= --min-round seconds;
  * the result is the best (shortest) of --rounds rounds; MB/s = input bytes per pass * passes
    / seconds / 1e6, for reading and writing alike; writing times write_mdx on models read beforehand;
  * round-trip: write_mdx(read_mdx(f)) == f, byte for byte.

Machines are noisy, so absolute MB/s alone means little; the number to compare across runs is the
ratio. With --viewer the reference is the most-used viewer's parser, timed by a Node subprocess
in the same run, on the same files (if it throws on some, ours is timed again on the files it
accepts and the ratio uses that). Without it the reference is a floor: copying the same bytes
(for reading) and b"".join of the same files cut into their top-level chunks (for writing). A
floor is what no parser can beat, not a competitor; the ratio says how far above memcpy cost we are.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import math
import os
import pstats
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from renderer.errors import FormatError  # noqa: E402
from renderer.formats.mdx import chunk_table, read_mdx, write_mdx  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus"
NODE_HARNESS = Path(__file__).resolve().parent / "node_reference.mjs"


@dataclass
class Item:
    path: str
    data: bytes
    model: object = None
    roundtrip: bool = False
    first_diff: int | None = None


@dataclass
class Timing:
    passes: int
    best_s: float
    rounds_s: list[float] = field(default_factory=list)

    def mb_s(self, nbytes: int) -> float:
        return nbytes * self.passes / self.best_s / 1e6


# -- corpus ------------------------------------------------------------------------------------
def load_corpus(root: Path) -> tuple[list[Item], list[tuple[str, str]]]:
    paths = sorted(str(p) for p in root.rglob("*.mdx") if p.is_file())
    accepted: list[Item] = []
    rejected: list[tuple[str, str]] = []
    for p in paths:
        data = Path(p).read_bytes()
        try:
            model = read_mdx(data, p)
        except FormatError as e:
            rejected.append((p, e.problem))
            continue
        out = write_mdx(model)
        item = Item(p, data, model, out == data)
        if not item.roundtrip:
            item.first_diff = next((i for i, (a, b) in enumerate(zip(out, data, strict=False)) if a != b),
                                   min(len(out), len(data)))
        accepted.append(item)
    return accepted, rejected


def split_chunks(data: bytes) -> list[bytes]:
    """The file cut into its header, each top-level chunk (with its 8-byte header) and any tail."""
    parts = [data[:4]]
    end = 4
    for _tag, at, size in chunk_table(data):
        parts.append(data[at : at + 8 + size])
        end = at + 8 + size
    if end < len(data):
        parts.append(data[end:])
    return parts


# -- timing ------------------------------------------------------------------------------------
def time_rounds(one_pass: Callable[[], None], rounds: int, min_round: float) -> Timing:
    one_pass()  # warm-up
    passes = 1
    while True:
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(passes):
            one_pass()
        dt = time.perf_counter() - t0
        if dt >= min_round or passes >= 1 << 20:
            break
        passes = min(passes * 100, max(passes * 2, math.ceil(passes * min_round * 1.1 / max(dt, 1e-9))))
    times = []
    for _ in range(rounds):
        gc.collect()
        t0 = time.perf_counter()
        for _ in range(passes):
            one_pass()
        times.append(time.perf_counter() - t0)
    return Timing(passes, min(times), times)


def read_pass(items: list[Item]) -> Callable[[], None]:
    pairs = [(it.data, it.path) for it in items]

    def run() -> None:
        for data, path in pairs:
            read_mdx(data, path)

    return run


def write_pass(items: list[Item]) -> Callable[[], None]:
    models = [it.model for it in items]

    def run() -> None:
        for m in models:
            write_mdx(m)

    return run


def copy_pass(items: list[Item]) -> Callable[[], None]:
    views = [memoryview(it.data) for it in items]

    def run() -> None:
        for v in views:
            bytes(v)

    return run


def join_pass(items: list[Item]) -> Callable[[], None]:
    parts = [split_chunks(it.data) for it in items]
    for it, p in zip(items, parts, strict=True):
        assert b"".join(p) == it.data, it.path

    def run() -> None:
        for p in parts:
            b"".join(p)

    return run


def measure_ours(items: list[Item], rounds: int, min_round: float) -> dict[str, Timing]:
    return {
        "read": time_rounds(read_pass(items), rounds, min_round),
        "write": time_rounds(write_pass(items), rounds, min_round),
    }


def measure_floor(items: list[Item], rounds: int, min_round: float) -> dict[str, Timing]:
    return {
        "read": time_rounds(copy_pass(items), rounds, min_round),
        "write": time_rounds(join_pass(items), rounds, min_round),
    }


def largest(items: list[Item], n: int) -> list[Item]:
    return sorted(items, key=lambda it: (-len(it.data), it.path))[:n]


# -- the viewer, in Node -----------------------------------------------------------------------
def run_viewer(bundle: str, node: str | None, items: list[Item], args) -> tuple[dict | None, str | None]:
    node = node or shutil.which("node")
    if not node:
        return None, "node not found on PATH"
    if not Path(bundle).is_file():
        return None, f"bundle {bundle} not found"
    cmd = [node, str(NODE_HARNESS), bundle, "--rounds", str(args.rounds), "--min-round", str(args.min_round)]
    if args.verbose:
        cmd += ["--detail-min-round", str(args.detail_min_round)]
        for it in largest(items, args.top):
            cmd += ["--detail-file", it.path]
    cmd += ["--", *(it.path for it in items)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.viewer_timeout)
    except subprocess.TimeoutExpired:
        return None, f"node harness timed out after {args.viewer_timeout} s"
    except OSError as e:
        return None, f"cannot run {node}: {e}"
    if proc.returncode != 0:
        return None, f"node harness failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, f"node harness printed no JSON: {proc.stdout[-500:]!r} {proc.stderr[-500:]!r}"


# -- report ------------------------------------------------------------------------------------
def short(path: str, root: Path) -> str:
    try:
        return os.path.relpath(path, root)
    except ValueError:
        return path


def fmt_mb(x: float) -> str:
    return f"{x:10.1f}"


def profile(items: list[Item], passes: int, top: int) -> str:
    out = io.StringIO()
    for label, make in (("read_mdx", read_pass), ("write_mdx", write_pass)):
        run = make(items)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(passes):
            run()
        prof.disable()
        st = pstats.Stats(prof, stream=io.StringIO())
        total = st.total_tt
        rows = sorted(st.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
        out.write(f"\ncProfile, {label}, {passes} passes over {len(items)} files: {total:.3f} s "
                  f"(profiler overhead inflates small calls)\n")
        out.write(f"  {'self %':>6} {'cum %':>6} {'calls':>9}  function\n")
        for (filename, line, func), (_cc, nc, tt, ct, _callers) in rows:
            where = short(filename, ROOT) if filename != "~" else ""
            name = f"{where}:{line}({func})" if where else func
            out.write(f"  {100 * tt / total:6.1f} {100 * ct / total:6.1f} {nc:9d}  {name}\n")
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help=f"folder searched for *.mdx ({DEFAULT_CORPUS})")
    ap.add_argument("--rounds", type=int, default=5, help="best of this many rounds (5)")
    ap.add_argument("--min-round", type=float, default=0.3, help="seconds one round takes at least (0.3)")
    ap.add_argument("--viewer", metavar="BUNDLE", help="JS bundle of mdx-m3-viewer's mdlx parser (see bench/README.md)")
    ap.add_argument("--node", help="node executable (default: node on PATH)")
    ap.add_argument("--viewer-timeout", type=float, default=600, help="seconds the Node harness may take (600)")
    ap.add_argument("--verbose", "-v", action="store_true", help="per-file numbers for the largest files")
    ap.add_argument("--top", type=int, default=5, help="how many of the largest files --verbose shows (5)")
    ap.add_argument("--detail-min-round", type=float, default=0.1, help="min round for per-file timing (0.1)")
    ap.add_argument("--profile", action="store_true", help="cProfile read_mdx and write_mdx over the corpus")
    ap.add_argument("--profile-passes", type=int, default=20, help="passes profiled (20)")
    ap.add_argument("--profile-top", type=int, default=15, help="functions listed per profile (15)")
    ap.add_argument("--json", type=Path, help="also write the numbers to this JSON file")
    args = ap.parse_args(argv)

    items, rejected = load_corpus(args.corpus)
    if not items:
        print(f"no readable MDX files under {args.corpus}", file=sys.stderr)
        return 1
    nbytes = sum(len(it.data) for it in items)
    print(f"corpus {args.corpus}: {len(items) + len(rejected)} MDX files, {len(items)} accepted "
          f"({nbytes:,} bytes), {len(rejected)} rejected with FormatError (skipped)")
    for p, problem in rejected:
        print(f"  rejected  {short(p, args.corpus)}: {problem[:90]}")
    print(f"method: best of {args.rounds} rounds, each round >= {args.min_round} s of whole-corpus passes; "
          f"MB/s = 1e6 input bytes per second\n")

    ours = measure_ours(items, args.rounds, args.min_round)
    floor = measure_floor(items, args.rounds, args.min_round)
    viewer, why_not = None, "no --viewer given"
    if args.viewer:
        viewer, why_not = run_viewer(args.viewer, args.node, items, args)

    report: dict = {
        "files": len(items), "bytes": nbytes, "rejected": [p for p, _ in rejected],
        "ours": {k: {"mb_s": t.mb_s(nbytes), "passes": t.passes, "best_s": t.best_s} for k, t in ours.items()},
        "floor": {k: {"mb_s": t.mb_s(nbytes), "passes": t.passes, "best_s": t.best_s} for k, t in floor.items()},
        "roundtrip_ours": sum(it.roundtrip for it in items),
    }
    o_r, o_w = ours["read"].mb_s(nbytes), ours["write"].mb_s(nbytes)
    f_r, f_w = floor["read"].mb_s(nbytes), floor["write"].mb_s(nbytes)
    w = 44
    print(f"{'':{w}} {'read MB/s':>10} {'write MB/s':>10}")
    print(f"{f'modelfarm (Python {sys.version.split()[0]}), {len(items)} files':{w}} {fmt_mb(o_r)} {fmt_mb(o_w)}")

    if viewer is not None:
        vfiles = {f["path"] for f in viewer["failed"]}
        common = [it for it in items if it.path not in vfiles]
        cbytes = sum(len(it.data) for it in common)
        if len(common) != len(items):
            ours_c = measure_ours(common, args.rounds, args.min_round)
            c_r, c_w = ours_c["read"].mb_s(cbytes), ours_c["write"].mb_s(cbytes)
            print(f"{f'modelfarm, the {len(common)} files the viewer reads':{w}} {fmt_mb(c_r)} {fmt_mb(c_w)}")
        else:
            c_r, c_w = o_r, o_w
        v_r, v_w = viewer["read"]["mb_s"], viewer["write"]["mb_s"]
        label = f"mdx-m3-viewer (Node {viewer['node']}), {viewer['files']} files"
        print(f"{label:{w}} {fmt_mb(v_r)} {fmt_mb(v_w)}")
        print(f"{'ratio modelfarm / viewer (same files)':{w}} {c_r / v_r:9.2f}x {c_w / v_w:9.2f}x")
        report["viewer"] = {"node": viewer["node"], "files": viewer["files"], "bytes": viewer["bytes"],
                            "read_mb_s": v_r, "write_mb_s": v_w, "failed": viewer["failed"],
                            "roundtrip": viewer["roundtrip"]["ok"]}
        report["ratio_vs_viewer"] = {"read": c_r / v_r, "write": c_w / v_w, "ours_read_mb_s": c_r,
                                     "ours_write_mb_s": c_w}
        print()
    else:
        if args.viewer:
            print(f"(viewer reference not run: {why_not}; falling back to the in-process floor)")
    label = 'floor: bytes copy / b"".join of chunks'
    print(f"{label:{w}} {fmt_mb(f_r)} {fmt_mb(f_w)}   "
          "(a lower bound, not a competitor)")
    print(f"{'ratio modelfarm / floor':{w}} {o_r / f_r:9.3f}x {o_w / f_w:9.3f}x")
    report["ratio_vs_floor"] = {"read": o_r / f_r, "write": o_w / f_w}

    print("\nround-trip, write(read(f)) == f byte for byte:")
    print(f"  modelfarm      {report['roundtrip_ours']}/{len(items)} accepted files")
    for it in items:
        if not it.roundtrip:
            print(f"    differs  {short(it.path, args.corpus)} (first difference at byte {it.first_diff})")
    if viewer is not None:
        rt = viewer["roundtrip"]
        print(f"  mdx-m3-viewer  {rt['ok']}/{len(items)} of the same files "
              f"({rt['ok']}/{rt['total']} of those it reads; throws on {len(viewer['failed'])})")
        for f in viewer["failed"]:
            print(f"    throws   {short(f['path'], args.corpus)} ({f['stage']}): {f['error'][:80]}")
        for m in rt["mismatched"]:
            size = "" if m["in_bytes"] == m["out_bytes"] else f", {m['in_bytes']} -> {m['out_bytes']} bytes"
            print(f"    differs  {short(m['path'], args.corpus)} (first difference at byte {m['first_diff']}{size})")

    if args.verbose:
        vdetail = {d["path"]: d for d in (viewer or {}).get("detail", [])}
        print(f"\n{args.top} largest files (best of {args.rounds}, rounds >= {args.detail_min_round} s), MB/s:")
        head = f"  {'bytes':>10} {'read':>8} {'write':>8}"
        if viewer is not None:
            head += f" {'v.read':>8} {'v.write':>8} {'r ratio':>8} {'w ratio':>8}"
        print(head + "  file")
        report["detail"] = []
        for it in largest(items, args.top):
            n = len(it.data)
            t = measure_ours([it], args.rounds, args.detail_min_round)
            r, wr = t["read"].mb_s(n), t["write"].mb_s(n)
            line = f"  {n:10,d} {r:8.1f} {wr:8.1f}"
            row = {"path": it.path, "bytes": n, "read_mb_s": r, "write_mb_s": wr}
            if viewer is not None:
                d = vdetail.get(it.path)
                if d:
                    vr, vw = d["read"]["mb_s"], d["write"]["mb_s"]
                    line += f" {vr:8.1f} {vw:8.1f} {r / vr:7.2f}x {wr / vw:7.2f}x"
                    row.update(viewer_read_mb_s=vr, viewer_write_mb_s=vw)
                else:
                    line += f" {'throws':>8} {'':>8} {'':>8} {'':>8}"
            print(line + f"  {short(it.path, args.corpus)}")
            report["detail"].append(row)

    if args.profile:
        print(profile(items, args.profile_passes, args.profile_top))

    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
