"""Fuzz every corpus format through load, pose and render, in a pool of long-lived workers.

    .venv/bin/python bench/fuzz.py [--seed 1] [--cases 1000] [--jobs 1] [--timeout 20] [--mem-mb 2048]
    .venv/bin/python bench/fuzz.py --seed 1 --case 123      # one case in this process, with its traceback

Each case mutates one corpus file (MDX, MDL, Halo .model/.gbxmodel, BLP, DDS, TGA, PNG, Halo
.bitmap; `fuzz_case` / `fuzz_mutate`) and loads it; models are posed at timestamps up to 2^53 ms
and rendered at 32x32. Cases run in --jobs worker processes (`fuzz_worker`), each with one EGL
context and an address-space cap of --mem-mb MiB (RLIMIT_AS). A case that has not answered within
--timeout seconds is a hang: its worker is killed and replaced; a worker that dies is a crash; a
MemoryError is a cap hit. Everything is seeded: case i of --seed s is the same on every run. The
table: cases, ok, FormatError (bad input refused, expected), other exceptions by type (a sample
message and the case that reproduces it), hangs, cap hits, crashes, cases/s.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.append(str(HERE))


@dataclass
class Summary:
    seed: int
    cases: int = 0
    ok: int = 0
    format_errors: int = 0
    ok_kinds: dict = field(default_factory=dict)  # kind -> ok cases (models: loaded, posed and rendered)
    exceptions: dict = field(default_factory=dict)  # type -> [count, sample message, sample case]
    hangs: list = field(default_factory=list)  # case indices
    caps: list = field(default_factory=list)
    crashes: list = field(default_factory=list)  # (case, exit status)
    seconds: float = 0.0
    slowest: tuple = (0.0, None)  # (seconds, case) of the slowest answered case

    def add(self, result: dict, took: float = 0.0) -> None:
        self.cases += 1
        if took > self.slowest[0]:
            self.slowest = (took, result["case"])
        kind = result["outcome"]
        if kind == "ok":
            self.ok += 1
            self.ok_kinds[result.get("kind", "?")] = self.ok_kinds.get(result.get("kind", "?"), 0) + 1
        elif kind == "FormatError":
            self.format_errors += 1
        elif kind == "cap":
            self.caps.append(result["case"])
        else:
            entry = self.exceptions.setdefault(result["type"], [0, result.get("message", ""), result["case"]])
            entry[0] += 1

    def table(self) -> str:
        rate = self.cases / self.seconds if self.seconds else 0.0
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.ok_kinds.items()))
        rows = [("cases", self.cases), ("ok", self.ok), (f"  ({kinds})", ""), ("FormatError", self.format_errors)]
        rows += [(f"exception {t}", v[0]) for t, v in sorted(self.exceptions.items())]
        rows += [("hangs", len(self.hangs)), ("cap hits", len(self.caps)), ("crashes", len(self.crashes)),
                 ("cases/s", f"{rate:.1f}"), ("slowest case (s)", f"{self.slowest[0]:.2f}")]
        out = [f"fuzz --seed {self.seed}: {self.cases} cases in {self.seconds:.0f} s "
               f"(slowest: case {self.slowest[1]})"]
        out += [f"  {name:<32} {value:>10}" for name, value in rows]
        for t, (count, message, case) in sorted(self.exceptions.items()):
            out.append(f"  {t} x{count}, e.g. case {case} (--seed {self.seed} --case {case}): {message}")
        for label, cases in (("hang", self.hangs), ("cap hit", self.caps), ("crash", self.crashes)):
            if cases:
                out.append(f"  {label}s, e.g.: {cases[:10]}")
        return "\n".join(out)


class Worker:
    """One worker process; `case` is the case it is running (None when idle)."""

    def __init__(self, seed: int, mem_mb: int):
        env = dict(os.environ, PYTHONPATH=str(HERE.parent))
        self.proc = subprocess.Popen([sys.executable, "-u", str(HERE / "fuzz_worker.py"), str(seed), str(mem_mb)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env, cwd=str(HERE.parent))
        self.case: int | None = None
        self.deadline = 0.0
        ready = self._line(time.monotonic() + 120)
        if not ready or not json.loads(ready).get("ready"):
            self.kill()
            raise RuntimeError("a fuzz worker did not start (no EGL context?)")

    def _line(self, deadline: float) -> str | None:
        """The next line, '' at end of file, None at the deadline."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                return self.proc.stdout.readline()

    def send(self, case: int, timeout: float) -> None:
        self.case = case
        self.sent = time.monotonic()
        self.deadline = self.sent + timeout
        self.proc.stdin.write(json.dumps({"case": case}) + "\n")
        self.proc.stdin.flush()

    def kill(self) -> int | None:
        self.proc.kill()
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            return None


def run(seed: int = 1, cases: int = 1000, jobs: int = 1, timeout: float = 20.0, mem_mb: int = 2048,
        first: int = 0, progress=None) -> Summary:
    """Run cases first .. first + cases - 1 of `seed`; returns the summary."""
    summary = Summary(seed)
    start = time.monotonic()
    todo = list(range(first, first + cases))[::-1]
    workers = [Worker(seed, mem_mb) for _ in range(max(1, min(jobs, cases)))]
    try:
        while todo or any(w.case is not None for w in workers):
            for w in workers:
                if w.case is None and todo:
                    w.send(todo.pop(), timeout)
            busy = [w for w in workers if w.case is not None]
            wait = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready, _, _ = select.select([w.proc.stdout for w in busy], [], [], wait)
            for i, w in enumerate(workers):
                if w.case is None:
                    continue
                if w.proc.stdout in ready:
                    line = w.proc.stdout.readline()
                    if line:
                        result = json.loads(line)
                        summary.add(result, time.monotonic() - w.sent)
                        w.case = None
                        if result["outcome"] == "cap":
                            w.kill()
                            workers[i] = Worker(seed, mem_mb)
                        continue
                    status = w.kill()
                    summary.cases += 1
                    summary.crashes.append((w.case, status))
                    workers[i] = Worker(seed, mem_mb)
                elif time.monotonic() >= w.deadline:
                    w.kill()
                    summary.cases += 1
                    summary.hangs.append(w.case)
                    workers[i] = Worker(seed, mem_mb)
                else:
                    continue
                if progress:
                    progress(summary)
            if progress and summary.cases and summary.cases % 500 == 0:
                summary.seconds = time.monotonic() - start
                progress(summary)
    finally:
        for w in workers:
            w.kill()
    summary.seconds = time.monotonic() - start
    return summary


def one_case(seed: int, index: int) -> None:
    """Run one case in this process and show what happens (the reproduction of a table entry)."""
    os.environ.setdefault("EGL_PLATFORM", "surfaceless")
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    sys.path.insert(0, str(HERE.parent))
    from fuzz_case import corpus_files, plan, run_case

    from renderer.frame import Renderer

    path, data, rng = plan(seed, index, corpus_files())
    print(f"case {index} of seed {seed}: {path} ({len(data)} bytes after mutation)")
    renderer = Renderer()
    try:
        run_case(path, data, rng, renderer)
        print("ok")
    finally:
        renderer.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--first", type=int, default=0, help="index of the first case (to resume a run)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds a case may take")
    ap.add_argument("--mem-mb", type=int, default=2048, help="address-space cap of a worker (RLIMIT_AS), MiB")
    ap.add_argument("--case", type=int, help="run this one case here, with its traceback")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.case is not None:
        one_case(a.seed, a.case)
        return 0
    last = [0.0]

    def progress(s: Summary) -> None:
        if not a.quiet and time.monotonic() - last[0] > 60:
            last[0] = time.monotonic()
            print(s.table(), flush=True)

    summary = run(a.seed, a.cases, a.jobs, a.timeout, a.mem_mb, a.first, progress)
    print(summary.table())
    bad = summary.exceptions or summary.hangs or summary.caps or summary.crashes
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
