"""The decision log under faults (issue 23, item 4): a decision and the index change it records take
effect together or not at all, whatever stops the command between its two writes (a real process
killed by `strace -e inject`, a full tmpfs), and a torn or corrupt log line does not break the
commands that come after it. Old goldens folders (the committed goldens/) stay valid."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from golden_runs import broken, image, key, make_run

from farm import goldens as G
from farm.cli import main

ROOT = Path(__file__).resolve().parents[1]
K1, K2 = key(t=0), key(t=500)
BY = "Tess Tester <tess@example.org>"


pytestmark = pytest.mark.slow  # farm processes under strace, killed (make test-fast leaves them out)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv("FARM_GOLDENS", raising=False)
    monkeypatch.delenv("FARM_OUT", raising=False)
    monkeypatch.setenv("FARM_USER", "ci-bot")
    monkeypatch.chdir(tmp_path)


def farm(*args, inject: str | None = None) -> subprocess.CompletedProcess:
    """`farm ARGS` as a process of its own; with `inject`, under `strace -f -e inject=INJECT`."""
    cmd = [sys.executable, "-m", "farm", *map(str, args)]
    if inject:
        cmd = ["strace", "-f", "-qq", "-o", os.devnull, "-e", f"trace={inject.split(':')[0]}", "-e",
               f"inject={inject}", *cmd]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def decisions(g: Path) -> list[tuple]:
    """(id, action, undone_by) of each decision `farm goldens log --json` lists."""
    p = farm("goldens", "log", "--json", "--goldens", g)
    assert p.returncode == 0, p.stderr
    return [(r["id"], r["action"], r["undone_by"]) for r in json.loads(p.stdout)["decisions"]]


def log_lines(g: Path) -> list[dict]:
    return [json.loads(x) for x in (g / G.LOG_NAME).read_bytes().decode().splitlines()]


def reviewed(tmp_path: Path):
    """A goldens folder with one approval (#1, of K1 and K2) and a later run whose K1 is broken."""
    store, g = tmp_path / "store", tmp_path / "goldens"
    good = make_run(store, {K1: image(1), K2: image(2)})
    G.approve(g, good, [K1, K2], by=BY)
    return store, g, make_run(store, {K1: broken(image(1))})


# --- a process stopped between the log line and the index


@functools.cache
def strace_works() -> bool:
    """strace is there and may trace (a container without ptrace cannot)."""
    return bool(shutil.which("strace")) and subprocess.run(["strace", "-qq", "-o", os.devnull, "true"],
                                                           capture_output=True).returncode == 0


@pytest.mark.parametrize("command, inject", [
    ("reject", "rename:error=EIO:signal=KILL"),  # killed as it renames the new index into place
    ("reject", "fsync:error=EIO:signal=KILL"),  # killed right after writing the log line
    ("approve", "rename:when=2:error=EIO:signal=KILL"),  # approve renames the image first, then the index
    ("reject", "rename:error=ENOSPC"),  # the index cannot be written: the command fails
])
def test_a_decision_stopped_between_its_two_writes_never_happened(tmp_path, command, inject):
    if not strace_works():
        pytest.skip("needs strace, allowed to trace")
    store, g, bad = reviewed(tmp_path)
    index, log = (g / G.INDEX_NAME).read_bytes(), (g / G.LOG_NAME).read_bytes()
    p = farm(command, bad.id, "--trace", "*", "--out", store, "--goldens", g, inject=inject)
    if "KILL" in inject:
        assert p.returncode == -signal.SIGKILL, p.stderr
    else:  # not killed: one sentence, and the log line it wrote is cut back off at once
        assert p.returncode == 2
        assert p.stderr.strip().splitlines() == [f"error: {g / G.INDEX_NAME}: no space left on the device; nothing was"
                                                 f" decided (the golden index and its log are as they were)"]
        assert (g / G.LOG_NAME).read_bytes() == log
    assert (g / G.INDEX_NAME).read_bytes() == index

    assert decisions(g) == [(1, "approve", None)]  # not the decision that never took effect
    p = farm("approve", "--undo", "--yes", "--goldens", g)
    assert p.returncode == 0, p.stderr
    assert "undid approve #1" in p.stdout  # the last decision in effect, not the stopped one
    assert G.GoldenIndex.load(g).entries == {}
    assert decisions(g) == [(1, "approve", 2), (2, "undo", None)]
    assert [r["action"] for r in log_lines(g)] == ["approve", "undo"]  # the stopped record is cut off
    p = farm("approve", "--redo", "1", "--yes", "--goldens", g)
    assert p.returncode == 0, p.stderr
    assert (g / G.INDEX_NAME).read_bytes() == index


# --- a full disk


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs (needs root)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode:
        pytest.skip("needs root to mount a tmpfs")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def fill(disk: Path, pages_left: int) -> Path:
    """Fill `disk` up, then free `pages_left` pages (a tmpfs counts in pages)."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"x" * 4096)
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - pages_left * 4096))
    return filler


def test_a_full_disk_during_a_reject_changes_nothing_then_everything_works(tmp_path, small_disk, capsys):
    store, g = tmp_path / "store", small_disk / "goldens"
    good = make_run(store, {K1: image(1), K2: image(2)})
    G.approve(g, good, [K1, K2], by=BY)
    bad = make_run(store, {K1: broken(image(1))})
    saved = {name: (g / name).read_bytes() for name in (G.INDEX_NAME, G.LOG_NAME)}
    failed_at = set()
    # how much is left, and how long the reject's log line is, decide which write hits the full disk
    for pages_left in (0, 1):
        for reason in ("", "r" * 1000, "r" * 3000):
            (small_disk / "filler").unlink(missing_ok=True)
            for name, data in saved.items():
                (g / name).write_bytes(data)
            fill(small_disk, pages_left)
            rc = main(["reject", bad.id, "--trace", K1, "--out", str(store), "--goldens", str(g), "--reason", reason])
            err = capsys.readouterr().err
            now = {name: (g / name).read_bytes() for name in saved}
            if rc == 0:  # it fit: both changed
                assert G.GoldenIndex.load(g).entry(K1)["rejected"] and len(log_lines(g)) == 2
                continue
            assert rc == 2 and now == saved, (pages_left, len(reason), err)
            name = next(n for n in saved if f"error: {g / n}: no space left on the device" in err)
            assert len(err.strip().splitlines()) == 1
            failed_at.add(name)
            assert sorted(p.name for p in g.iterdir()) == ["approvals.jsonl", "images", "index.jsonl"]  # no stray
    assert failed_at == {G.INDEX_NAME, G.LOG_NAME}  # the disk filled up during each of the two writes

    (small_disk / "filler").unlink()
    assert main(["reject", bad.id, "--trace", K1, "--out", str(store), "--goldens", str(g)]) == 0
    assert main(["goldens", "log", "--goldens", str(g)]) == 0
    assert main(["approve", "--undo", "--yes", "--goldens", str(g)]) == 0
    assert main(["approve", bad.id, "--trace", K1, "--out", str(store), "--goldens", str(g)]) == 0
    assert [r["action"] for r in log_lines(g)] == ["approve", "reject", "undo", "approve"]
    assert G.GoldenIndex.load(g).entry(K1)["approved"][0]["run"] == bad.id


# --- torn and corrupt lines


def test_a_torn_last_line_is_ignored_with_a_warning_and_cut_off(tmp_path):
    store, g, bad = reviewed(tmp_path)
    whole = (g / G.LOG_NAME).read_bytes()
    torn = b'{"id": 2, "action": "reject", "by": "ci-bot", "at": "2026-'  # a write cut short by a full disk
    (g / G.LOG_NAME).write_bytes(whole + torn)

    p = farm("goldens", "log", "--goldens", g)
    assert p.returncode == 0 and "#1" in p.stdout
    assert f"{g / G.LOG_NAME}: the last line (byte offset {len(whole)}, {len(torn)} bytes) is torn" in p.stderr
    p = farm("reject", bad.id, "--trace", "*", "--out", store, "--goldens", g)
    assert p.returncode == 0, p.stderr
    assert (g / G.LOG_NAME).read_bytes().startswith(whole + b'{"id": 2, "action": "reject"')
    assert [r["action"] for r in log_lines(g)] == ["approve", "reject"]
    assert farm("approve", "--undo", "--yes", "--goldens", g).returncode == 0
    assert decisions(g) == [(1, "approve", None), (2, "reject", 3), (3, "undo", None)]


def test_a_corrupt_line_in_the_middle_is_an_error_naming_file_and_line(tmp_path):
    store, g, bad = reviewed(tmp_path)
    lines = (g / G.LOG_NAME).read_bytes().splitlines(keepends=True)
    (g / G.LOG_NAME).write_bytes(lines[0] + b'{"id": 2, "act\n' + lines[0])
    reject = ("reject", bad.id, "--trace", "*", "--out", store)
    for args in (("goldens", "log"), ("approve", "--undo", "--yes"), reject):
        p = farm(*args, "--goldens", g)
        assert p.returncode == 2
        assert p.stderr.startswith(f"error: {g / G.LOG_NAME}:2: not valid JSON"), p.stderr
        assert "Traceback" not in p.stderr


# --- old folders


def test_the_committed_goldens_folder_reads_and_changes_as_before(tmp_path):
    """goldens/ was written before this log discipline: its index and log stay valid, an undo and a
    redo of its last decision work and give back the same index bytes."""
    g = tmp_path / "goldens"
    shutil.copytree(ROOT / "goldens", g, ignore=shutil.ignore_patterns("models"))
    index, log = (g / G.INDEX_NAME).read_bytes(), (g / G.LOG_NAME).read_bytes()
    old = [json.loads(x) for x in log.splitlines()]
    assert G.GoldenIndex.load(g).log() == old
    assert [d[0] for d in decisions(g)] == [r["id"] for r in old]
    last = old[-1]["id"]
    assert main(["approve", "--undo", "--yes", "--goldens", str(g)]) == 0
    assert main(["approve", "--redo", str(last), "--yes", "--goldens", str(g)]) == 0
    assert (g / G.INDEX_NAME).read_bytes() == index
    assert (g / G.LOG_NAME).read_bytes().startswith(log)
    assert [r["action"] for r in log_lines(g)][len(old):] == ["undo", "redo"]
