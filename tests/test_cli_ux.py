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


# --- 6. CLI consistency


def _all_parsers():
    from farm.cli import build_parser

    p = build_parser()
    sub = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    return p, sub.choices


def test_every_argument_has_help_and_every_command_an_example():
    _, commands = _all_parsers()
    for name, parser in commands.items():
        for action in parser._actions:
            if action.dest == "help":
                continue
            assert action.help, f"farm {name}: {action.option_strings or action.dest} has no help"
        assert parser.epilog and f"farm {name}" in parser.epilog, f"farm {name} has no example"
        assert "examples:" in parser.format_help()


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        farm("--version")
    assert e.value.code == 0 and capsys.readouterr().out.startswith("farm 0.")


def test_help_lists_every_farm_variable_the_source_reads(capsys):
    import re
    from pathlib import Path

    from farm.environment import FARM_VARIABLES

    root = Path(__file__).resolve().parents[1]
    used = set()
    for folder in ("farm", "renderer"):
        for f in (root / folder).rglob("*.py"):
            used |= set(re.findall(r"\bFARM_[A-Z][A-Z_]*[A-Z]\b", f.read_text("utf-8")))
    used -= {"FARM_VARIABLES"}
    listed = {n for n, _, _ in FARM_VARIABLES}
    assert used - listed == set(), f"FARM_* variables read but not in farm.environment.FARM_VARIABLES: {used - listed}"
    with pytest.raises(SystemExit):
        farm("--help")
    out = capsys.readouterr().out
    for name, what, _ in FARM_VARIABLES:
        assert name in out and what[:20] in out


def test_json_latest_and_patterns_anywhere(tmp_path, capsys):
    store, g = tmp_path / "store", tmp_path / "goldens"
    first = make_run(store, {K1: image(1), K2: image(2), K3: image(3)})
    assert farm("approve", "latest", "--trace", "models/b", "--out", store, "--goldens", g) == 0  # substring
    assert GoldenIndex.load(g).traces() == {K3}
    assert farm("approve", "latest", "--trace", "|500ms|", "--out", store, "--goldens", g) == 0
    assert farm("approve", "latest", "--trace", "Stand|0*x32", "--out", store, "--goldens", g) == 0  # glob inside
    assert GoldenIndex.load(g).traces() == {K1, K2, K3}
    capsys.readouterr()
    import os
    import time

    second = make_run(store, {K1: image(1), K2: broken(image(2))})
    later = time.time() + 5
    os.utime(store / "jobs" / f"{second.id}.json", (later, later))
    assert farm("compare", "latest", "--out", store, "--goldens", g, "--json") == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["job"] == second.id and doc["verdict"] == "fail" and doc["traces"][K2]["status"] == "fail"
    assert farm("status", "latest", "--out", store, "--json") == 0
    assert json.loads(capsys.readouterr().out)["job"] == second.id
    assert farm("diff", first.id, "latest", "--out", store, "--json") == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "diff" and doc["counts"]["changed"] == 1 and doc["counts"]["removed"] == 1
    assert farm("goldens", "--goldens", g, "--json") == 0
    assert json.loads(capsys.readouterr().out)["traces"] == 3
    # -o is the command's output folder everywhere it writes one
    assert farm("compare", "latest", "--out", store, "--goldens", g, "-o", tmp_path / "rep") == 1
    assert (tmp_path / "rep" / "index.html").is_file()


def test_status_of_a_missing_job_lists_every_job(tmp_path, capsys):
    store = tmp_path / "store"
    ids = [make_run(store, {K1: image(1)}, job_id=f"job-{i}").id for i in range(6)]
    assert farm("status", "nope", "--out", store) == 2
    err = capsys.readouterr().err
    assert "jobs there (6): " + ", ".join(ids) in err


def test_run_json(tmp_path, capsys, fake_run):
    fake_run.append({K1: image(1)})
    assert farm("run", "job.toml", "--update-goldens", "--json") == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["run"]["done"] == 1 and doc["comparison"]["verdict"] == "pass"
    assert "--update-goldens=new: 1 trace(s) approved" in cap.err


def test_size_syntax_is_one_everywhere():
    from farm.cli.common import size_arg, square_size_arg

    assert size_arg("128") == (128, 128) and size_arg("64x32") == (64, 32)
    assert square_size_arg("96x96") == 96 and square_size_arg("96") == 96
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match="square"):
        square_size_arg("96x64")
    _, commands = _all_parsers()
    for name in ("render", "thumbnails"):
        size = next(a for a in commands[name]._actions if a.dest == "size")
        assert "N" in size.help and ("WxH" in size.help or "NxN" in size.help)


def test_project_file_found_upwards(tmp_path, capsys, monkeypatch):
    from farm.environment import broker_url, default_out
    from farm.project import project
    from farm.settings import SettingError

    (tmp_path / "assets").mkdir()
    (tmp_path / "farm.toml").write_text('store = "my-store"\ngoldens = "my-goldens"\nassets = ["assets"]\n'
                                        'broker = "redis://example:6379/0"\n[defaults]\nallow-new = true\n'
                                        'limit = 3\n')
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    proj = project()
    assert proj.path == tmp_path / "farm.toml" and proj.assets == (str(tmp_path / "assets"),)
    assert default_out() == str(tmp_path / "my-store")
    assert broker_url() == "redis://example:6379/0" and broker_url("local") is None
    monkeypatch.setenv("FARM_OUT", "env-store")
    assert default_out() == "env-store"  # the environment wins over the file
    monkeypatch.delenv("FARM_OUT")
    run = make_run(tmp_path / "my-store", {K1: image(1)})
    # no --out, no --goldens: farm.toml's; [defaults] allow-new lets the new trace pass
    assert farm("compare", run.id) == 0
    out = capsys.readouterr().out
    assert "PASSED" in out and "(allowed by --allow-new)" in out
    from farm.cli import build_parser

    assert build_parser().parse_args(["render", "x.mdx", "-o", "x.png"]).assets == [str(tmp_path / "assets")]
    (tmp_path / "farm.toml").write_text('[defaults]\nno_such_option = 1\n')
    assert farm("status", "latest") == 2
    assert "no_such_option: no command has such an option" in capsys.readouterr().err
    (tmp_path / "farm.toml").write_text('stor = "x"\n')
    with pytest.raises(SettingError, match="unknown key"):
        project()


# --- 10. small slips


def test_small_slips(tmp_path, capsys):
    store, g = tmp_path / "store", tmp_path / "goldens"
    run = make_run(store, {K1: image(1), K2: image(2)})
    assert farm("reject", run.id, "--trace", K1, "--out", store, "--goldens", g) == 0
    out = capsys.readouterr().out
    assert "1 trace(s) rejected by ci-bot" in out and "rejectd" not in out
    assert farm("inspect", tmp_path / "x.mdx") == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'x.mdx'}: cannot read file" in err and "::" not in err
    # the diff summary's thumbnails: head frame alt "head", base frame alt "base" (not new/golden, not swapped)
    from farm.compare.runs import diff_runs
    from farm.report import write_report
    from farm.report.images import image_relpath

    head = make_run(store, {K1: broken(image(1)), K2: image(2)})
    results = diff_runs(run, head)
    write_report(results, tmp_path / "r", image_base="https://ci/r/")
    md = (tmp_path / "r" / "summary.md").read_text()
    t = results["traces"][K1]
    assert f'<img src="https://ci/r/{image_relpath(t["png"])}" width="96" alt="head">' in md
    assert f'<img src="https://ci/r/{image_relpath(t["golden"]["png"])}" width="96" alt="base">' in md
