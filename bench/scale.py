"""The farm's own cost at scale, with an instant renderer (bench/instant.py: a fixed 8x8 frame), at
1k, 10k, 100k (and 1M) frames (issue 33, items 1 and 2).

    .venv/bin/python bench/scale.py [--sizes 1000,10000,100000] [--workers 2] [--no-browser] [--job-only]

For each size N, in a fresh folder: N/100 copies of the sample crate, 100 timestamps of its Stand
sequence each, 8x8 (48-frame batches). Each step runs as its own process, so its CPU and peak RSS
are its own (getrusage of that process; the local pool's workers are not the coordinator's):

1. ``run``: plan + run + record (`farm.run.jobs.run_job`, local pool of --workers): wall, frames/s,
   the coordinator's CPU per frame and peak RSS;
2. ``status``: `farm status` of that job;
3. ``approve --new``: every frame becomes a golden;
4. ``run again`` with about one frame in 1000 drawn differently (BENCH_INSTANT_FAIL_EVERY), then
   ``compare -o``: the comparison and the whole report folder (pages, junit.xml, summary.md), wall,
   CPU and peak RSS; the size of index.html, of the largest page and of junit.xml, the number of
   files in the largest img/ shard;
5. (unless --no-browser) headless Chromium (tests/browser.py: chromedriver's WebDriver API) opens
   index.html: seconds until report.js is ready; then a search over every page: seconds until the
   matches are listed.

At the end, per-frame figures at N against the smallest N measured in the same run (linear growth
is a ratio of 1 or less). The load average is printed first and last: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PER_MODEL = 100  # timestamps of each model copy


def write_job(root: Path, frames: int) -> Path:
    sys.path.insert(0, str(ROOT))
    from renderer.samples import write_samples

    samples = root / "samples"
    write_samples(samples)
    crate = (samples / "crate.mdx").read_bytes()
    models = root / "models"
    models.mkdir()
    for i in range(max(1, frames // PER_MODEL)):
        (models / f"crate{i:06d}.mdx").write_bytes(crate)
    times = ", ".join(str(20 * i) for i in range(PER_MODEL))
    manifest = root / "scale.toml"
    manifest.write_text(f'name = "scale"\nsize = "8x8"\nsequences = ["Stand"]\ntimestamps = [{times}]\n'
                        f'[[models]]\npaths = ["models/*.mdx"]\n')
    return manifest


def measured(argv: list[str], env: dict, cwd: Path) -> dict:
    """Run a process; its wall seconds, CPU seconds and peak RSS (MB), and its stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)  # this process's own rusage (Popen.wait would not give it)
        p.returncode = code = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    if code not in (0, 1):
        raise SystemExit(f"bench: {' '.join(argv)} exited {code}:\n{errors[-3000:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss / 1024, "out": text}


RUN = """
import json, resource, sys, time
from farm.run.jobs import run_job
t0 = time.perf_counter()
job = run_job(sys.argv[1], out=sys.argv[2], workers=int(sys.argv[3]), job_id=sys.argv[4], progress=False)
wall = time.perf_counter() - t0
c = job.counts()
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss / 1024, "counts": c}))
"""


def run(env: dict, root: Path, manifest: Path, workers: int, job: str) -> dict:
    m = measured([sys.executable, "-c", RUN, str(manifest), str(root / "out"), str(workers), job], env, root)
    inner = json.loads(m["out"].strip().splitlines()[-1])
    if inner["counts"]["failed"] or inner["counts"]["pending"]:
        raise SystemExit(f"bench: run {job}: {inner['counts']}")
    return {**inner, "frames": inner["counts"]["done"]}


def farm(env: dict, root: Path, *args: str) -> dict:
    return measured([sys.executable, "-m", "farm.cli", *args], env, root)


def browse(report: Path) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    import browser

    why = browser.available()
    if why:
        return {"browser": why}
    with browser.Browser() as b:
        t0 = time.perf_counter()
        b.get((report / "index.html").as_uri())
        b.wait_for("return document.body.getAttribute('data-ready') === '1'", timeout=120)
        drawn = time.perf_counter() - t0
        box = b.find("#search")
        t0 = time.perf_counter()
        b._s("POST", f"/element/{box[browser.ELEMENT]}/value", {"text": "crate000009.mdx|Stand|19"})
        b.wait_for("return !!document.body.getAttribute('data-searched')", timeout=300)
        searched = time.perf_counter() - t0
        found = b.run("return document.querySelectorAll('#all-matches-list tbody tr').length")
        severe = b.severe_logs()
    return {"drawn_s": drawn, "search_s": searched, "search_rows": found, "console_errors": len(severe)}


def report_sizes(report: Path) -> dict:
    pages = sorted((report / "pages").glob("*.html")) if (report / "pages").is_dir() else []
    shards = [sum(1 for _ in d.iterdir()) for d in (report / "img").iterdir() if d.is_dir()]
    return {"index_mb": (report / "index.html").stat().st_size / 1e6, "pages": len(pages) + 1,
            "largest_page_mb": max([p.stat().st_size for p in pages] + [0]) / 1e6,
            "junit_mb": (report / "junit.xml").stat().st_size / 1e6, "img_files": sum(shards),
            "largest_shard": max(shards + [0])}


def one(n: int, workers: int, use_browser: bool, keep: bool, steps: tuple = ("run", "status", "compare")) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"farm-scale-{n}-"))
    try:
        manifest = write_job(root, n)
        env = {**os.environ, "FARM_RENDERER": "instant:InstantRenderer",
               "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT)]), "FARM_OUT": str(root / "out"),
               "FARM_GOLDENS": str(root / "goldens")}
        r = {"n": n}
        r["run"] = run(env, root, manifest, workers, "a")
        r["status"] = farm(env, root, "status", "a")
        if "compare" not in steps:  # a job's own cost alone (plan, run, status): issue 33 item 2 at 1M
            return r
        r["approve"] = farm(env, root, "approve", "a", "--new", "--yes")
        r["run2"] = run({**env, "BENCH_INSTANT_FAIL_EVERY": "1000"}, root, manifest, workers, "b")
        r["compare"] = farm(env, root, "compare", "b", "-o", str(root / "report"))
        r["report"] = report_sizes(root / "report")
        if use_browser:
            r["browser"] = browse(root / "report")
        return r
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def show(r: dict, base: dict) -> None:
    n, run_, f = r["n"], r["run"], r["run"]["frames"]
    per = run_["cpu"] / f * 1000
    base_per = base["run"]["cpu"] / base["run"]["frames"] * 1000
    print(f"\n{n:,} frames")
    print(f"  run (plan+run+record): {run_['wall']:.1f} s wall, {f / run_['wall']:.0f} frames/s; coordinator"
          f" {run_['cpu']:.1f} s CPU = {per:.3f} ms/frame (x{per / base_per:.2f} of {base['n']:,}), peak RSS"
          f" {run_['rss']:.0f} MB")
    for name in ("status", "approve", "compare"):
        if name not in r or name not in base:
            continue
        m = r[name]
        cpf = m["cpu"] / f * 1000
        base_cpf = base[name]["cpu"] / base["run"]["frames"] * 1000
        print(f"  {name}: {m['wall']:.1f} s wall, {m['cpu']:.1f} s CPU ({cpf:.3f} ms/frame, x{cpf / base_cpf:.2f}"
              f" of {base['n']:,}), peak RSS {m['rss']:.0f} MB")
    if "report" not in r:
        return
    rep = r["report"]
    print(f"  report: index.html {rep['index_mb']:.2f} MB, {rep['pages']} pages (largest {rep['largest_page_mb']:.2f}"
          f" MB), junit.xml {rep['junit_mb']:.1f} MB, {rep['img_files']:,} images, largest img/ shard"
          f" {rep['largest_shard']:,} files")
    if "browser" in r:
        b = r["browser"]
        if "drawn_s" in b:
            print(f"  chromium: landing page ready in {b['drawn_s']:.2f} s; search over every page"
                  f" {b['search_s']:.2f} s ({b['search_rows']} rows); {b['console_errors']} console errors")
        else:
            print(f"  chromium: not run ({b['browser']})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the folders (printed)")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--job-only", action="store_true",
                    help="plan + run + status only (no approve, compare or report): the 1M row of issue 33 item 2")
    a = ap.parse_args()
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    results = []
    for n in (int(x) for x in a.sizes.split(",")):
        steps = ("run", "status") if a.job_only else ("run", "status", "compare")
        results.append(one(n, a.workers, not a.no_browser, a.keep, steps))
        show(results[-1], results[0])
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
