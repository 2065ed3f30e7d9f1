"""Issue 16: bootstrapping goldens, undo by decision id, CLI consistency (--json, latest, patterns,
--version, farm.toml, FARM_* table), through the command line. No GL: runs are made by hand
(golden_runs) and `farm run`'s renderer is replaced by one that returns such a run."""

from __future__ import annotations

import json

import pytest
from golden_runs import broken, image, key, make_run

from farm.cli import main
from farm.goldens import GoldenIndex

K1, K2, K3 = key(t=0), key(t=500), key("models/b.mdx", "Walk", 100)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ("FARM_GOLDENS", "FARM_OUT", "FARM_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FARM_USER", "ci-bot")
    monkeypatch.chdir(tmp_path)


def farm(*args) -> int:
    return main([str(a) for a in args])


@pytest.fixture
def fake_run(monkeypatch, tmp_path):
    """`farm run job.toml` without GL: each call returns the next hand-made run (frames given)."""
    (tmp_path / "job.toml").write_text('name = "t"\n')
    queue = []

    def run_job(manifest, out=None, **kw):
        job = make_run(out or "farm-out", queue.pop(0))
        job.data["manifest"] = str(tmp_path / "job.toml")
        job.save(force=True)
        return job

    monkeypatch.setattr("farm.cli.jobs.run_job", run_job)
    return queue


# --- 1. bootstrapping


def test_first_run_prints_the_bootstrap_command_then_update_goldens_approves(tmp_path, capsys, fake_run):
    fake_run.append({K1: image(1), K2: image(2)})
    assert farm("run", "job.toml") == 0  # no goldens at all: rendered, not compared
    out = capsys.readouterr().out
    assert "farm run job.toml --update-goldens=new" in out

    fake_run.append({K1: image(1), K2: image(2)})
    assert farm("run", "job.toml", "--update-goldens") == 0
    out = capsys.readouterr().out
    assert "--update-goldens=new: 2 trace(s) approved" in out and "PASSED" in out
    assert GoldenIndex.load(tmp_path / "goldens").traces() == {K1, K2}

    # an empty goldens folder that exists: the first comparison names the same command
    (tmp_path / "g2").mkdir()
    (tmp_path / "g2" / "index.jsonl").write_text("")
    fake_run.append({K1: image(1)})
    assert farm("run", "job.toml", "--goldens", "g2") == 1
    assert "farm run job.toml --update-goldens=new --goldens g2" in capsys.readouterr().out


def test_update_goldens_failed_and_all(tmp_path, capsys, fake_run):
    fake_run.append({K1: image(1), K2: image(2)})
    assert farm("run", "job.toml", "--update-goldens=all") == 0
    capsys.readouterr()
    fake_run.append({K1: image(1), K2: broken(image(2)), K3: image(3)})
    assert farm("run", "job.toml", "--update-goldens=failed", "--allow-new") == 0
    out = capsys.readouterr().out
    assert "--update-goldens=failed: 1 trace(s) approved" in out
    assert GoldenIndex.load(tmp_path / "goldens").traces() == {K1, K2}  # the new K3 was not approved


def test_compare_all_new_with_allow_new_passes_with_a_note(tmp_path, capsys):
    store = tmp_path / "store"
    run = make_run(store, {K1: image(1), K2: image(2)})
    (tmp_path / "g").mkdir()
    assert farm("compare", run.id, "--out", store, "--goldens", tmp_path / "g", "--allow-new") == 0
    out = capsys.readouterr().out
    assert "nothing was compared: all 2 trace(s) are new (allowed by --allow-new)" in out
    assert "problem:" not in out
    # without --allow-new it still fails, and an empty run never passes
    assert farm("compare", run.id, "--out", store, "--goldens", tmp_path / "g") == 1
    assert "problem: 2 trace(s) have no golden yet" in capsys.readouterr().out
    errors = make_run(store, {K1: "cannot read"})
    assert farm("compare", errors.id, "--out", store, "--goldens", tmp_path / "g", "--allow-new") == 1
    assert "nothing was compared" in capsys.readouterr().out


# --- 2. undo and redo by decision id


def test_goldens_log_undo_by_id_asks_and_redo(tmp_path, capsys, monkeypatch):
    store, g = tmp_path / "store", tmp_path / "goldens"
    run1 = make_run(store, {K1: image(1), K2: image(2)})
    assert farm("approve", run1.id, "--trace", K1, "--out", store, "--goldens", g) == 0  # decision #1
    assert farm("approve", run1.id, "--trace", K2, "--out", store, "--goldens", g) == 0  # decision #2
    capsys.readouterr()
    assert farm("goldens", "log", "--goldens", g) == 0
    out = capsys.readouterr().out
    assert "#1    " in out and "ci-bot: approve, 1 trace(s), run " + run1.id in out and "#2" in out

    # undo #1 (not the last one): without a terminal and without --yes it refuses with a sentence
    assert farm("approve", "--undo", "1", "--goldens", g) == 2
    cap = capsys.readouterr()
    assert f"restore {K1} [generic]" in cap.out and "pass --yes" in cap.err
    assert GoldenIndex.load(g).traces() == {K1, K2}  # nothing changed
    # a terminal that answers "n", then one that answers "y"
    monkeypatch.setattr("sys.stdin.isatty", lambda: True, raising=False)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)
    monkeypatch.setattr("builtins.input", lambda q: "n")
    assert farm("approve", "--undo", "1", "--goldens", g) == 1
    assert GoldenIndex.load(g).traces() == {K1, K2}
    monkeypatch.setattr("builtins.input", lambda q: "y")
    assert farm("approve", "--undo", "1", "--goldens", g) == 0
    assert "undid approve #1" in capsys.readouterr().out
    assert GoldenIndex.load(g).traces() == {K2}
    monkeypatch.undo()
    monkeypatch.setenv("FARM_USER", "ci-bot")

    assert farm("approve", "--undo", "1", "--goldens", g, "--yes") == 2  # already undone
    assert "already undone (by #3)" in capsys.readouterr().err
    assert farm("goldens", "log", "--goldens", g, "--json") == 0
    rows = json.loads(capsys.readouterr().out)["decisions"]
    assert [(r["id"], r["action"], r["undone_by"]) for r in rows] == [(1, "approve", 3), (2, "approve", None),
                                                                       (3, "undo", None)]
    assert farm("approve", "--redo", "1", "--goldens", g, "--yes") == 0
    assert "redid approve #1" in capsys.readouterr().out
    assert GoldenIndex.load(g).traces() == {K1, K2}
    # undo without an id: the last decision in effect (#2), also only with --yes here
    assert farm("approve", "--undo", "--goldens", g) == 2
    capsys.readouterr()
    assert farm("approve", "--undo", "--goldens", g, "--yes") == 0
    assert "undid approve #2" in capsys.readouterr().out
    assert GoldenIndex.load(g).traces() == {K1}
    assert farm("approve", "--undo", "99", "--goldens", g, "--yes") == 2
    assert "no decision #99" in capsys.readouterr().err
