"""`farm compare / approve / reject / goldens / report / diff` through the command line: what they
print, what they change and their exit statuses (0 pass, 1 fail, 2 usage)."""

from __future__ import annotations

import json
import shlex

import pytest
from golden_runs import broken, image, key, make_run, noisy

from farm.cli import main
from farm.goldens import GoldenIndex

K1, K2, K3 = key(t=0), key(t=500), key("models/b.mdx", "Walk", 100)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv("FARM_GOLDENS", raising=False)
    monkeypatch.delenv("FARM_OUT", raising=False)
    monkeypatch.setenv("FARM_USER", "ci-bot")
    monkeypatch.chdir(tmp_path)


def farm(*args) -> int:
    return main([str(a) for a in args])


def test_compare_approve_new_then_failed_then_undo(tmp_path, capsys):
    store, g = tmp_path / "store", tmp_path / "goldens"
    run1 = make_run(store, {K1: image(1), K2: image(2)})
    assert farm("compare", run1.id, "--out", store, "--goldens", g) == 1
    out = capsys.readouterr().out
    assert "FAILED: 2 new of 2 traces (0 compared)" in out
    assert f"farm approve {run1.id} --new --out store --goldens goldens" in out  # the exact command

    assert farm("approve", run1.id, "--out", store, "--goldens", g) == 2  # nothing selected: nothing approved
    assert "say what to approve" in capsys.readouterr().err
    assert not (g / "index.jsonl").exists() or GoldenIndex.load(g).entries == {}

    assert farm("approve", run1.id, "--new", "--out", store, "--goldens", g) == 0
    out = capsys.readouterr().out
    assert "2 trace(s) approved by ci-bot" in out and "farm approve --undo 1 --goldens" in out
    assert farm("compare", run1.id, "--out", store, "--goldens", g) == 0
    assert "PASSED: 2 pass of 2 traces (2 compared)" in capsys.readouterr().out

    run2 = make_run(store, {K1: noisy(image(1)), K2: broken(image(2)), K3: image(3)})
    assert farm("compare", run2.id, "--out", store, "--goldens", g, "--allow-new") == 1
    out = capsys.readouterr().out
    assert "1 fail" in out and "1 new" in out and "passed within the thresholds" in out
    # --failed approves only the failed trace, not the new one
    assert farm("approve", run2.id, "--failed", "--out", store, "--goldens", g, "--by", "Ann") == 0
    out = capsys.readouterr().out
    assert f"approved {K2} [generic]" in out and K3 not in out
    assert GoldenIndex.load(g).entry(K2)["approved"][0]["by"] == "Ann"
    assert farm("compare", run2.id, "--out", store, "--goldens", g, "--allow-new") == 0
    capsys.readouterr()

    assert farm("approve", "--undo", "--goldens", g, "--yes") == 0
    assert "undid approve #2" in capsys.readouterr().out
    assert farm("compare", run2.id, "--out", store, "--goldens", g, "--allow-new") == 1
    assert farm("approve", run2.id, "--undo", "--goldens", g) == 2  # --undo takes no run


def test_approve_trace_pattern_and_all(tmp_path, capsys):
    store, g = tmp_path / "store", tmp_path / "goldens"
    run = make_run(store, {K1: image(1), K2: image(2), K3: image(3)})
    assert farm("approve", run.id, "--trace", "models/b.mdx|*", "--out", store, "--goldens", g) == 0
    assert GoldenIndex.load(g).traces() == {K3}
    assert farm("approve", run.id, "--trace", "nothing*", "--out", store, "--goldens", g) == 1
    assert farm("approve", run.id, "--all", "--out", store, "--goldens", g) == 0
    assert GoldenIndex.load(g).traces() == {K1, K2, K3}


def test_reject_then_compare_says_rejected(tmp_path, capsys):
    store, g = tmp_path / "store", tmp_path / "goldens"
    good = make_run(store, {K1: image(1)})
    farm("approve", good.id, "--all", "--out", store, "--goldens", g)
    bad = make_run(store, {K1: broken(image(1))})
    assert farm("reject", bad.id, "--trace", K1, "--reason", "lid inside out", "--out", store, "--goldens", g) == 0
    capsys.readouterr()
    again = make_run(store, {K1: broken(image(1))})
    assert farm("compare", again.id, "--out", store, "--goldens", g) == 1
    out = capsys.readouterr().out
    assert "1 rejected" in out and "lid inside out" in out


def test_goldens_are_found_next_to_the_manifest(tmp_path, capsys):
    store = tmp_path / "store"
    run = make_run(store, {K1: image(1)}, name="t")  # its manifest is store/t.toml
    assert farm("compare", run.id, "--out", store) == 2
    assert "no golden index found" in capsys.readouterr().err
    assert farm("approve", run.id, "--all", "--out", store) == 2
    assert "pass --goldens DIR" in capsys.readouterr().err
    (store / "goldens").mkdir()
    (store / "goldens" / "index.jsonl").write_text('{"format": "modelfarm.goldens/1"}\n')
    assert farm("approve", run.id, "--all", "--out", store) == 0
    assert GoldenIndex.load(store / "goldens").traces() == {K1}
    assert farm("compare", run.id, "--out", store) == 0


def test_goldens_summary_and_stale(tmp_path, capsys):
    from renderer.samples import write_samples

    write_samples(tmp_path / "models")
    (tmp_path / "m.toml").write_text('size = "32x32"\n[[models]]\npath = "models/crate.mdx"\nsequences = ["Stand"]\n')
    live = "models/crate.mdx|Stand|0ms|auto|32x32|msaa0|team0|transparent"
    store, g = tmp_path / "store", tmp_path / "goldens"
    run = make_run(store, {live: image(1), K3: image(3)})
    farm("approve", run.id, "--all", "--out", store, "--goldens", g)
    capsys.readouterr()
    assert farm("goldens", "--goldens", g) == 0
    out = capsys.readouterr().out
    assert "2 traces, 2 lines, 2 approved images" in out and "ci-bot: approve, 2 trace(s)" in out
    assert farm("goldens", "--goldens", g, "--stale", tmp_path / "m.toml") == 1
    out = capsys.readouterr().out
    assert f"stale: {K3} [generic]" in out and live not in out
    assert farm("goldens", "--goldens", g, "--stale", tmp_path / "m.toml", "--prune") == 0
    assert farm("goldens", "--goldens", g, "--stale", tmp_path / "m.toml") == 0
    assert "every golden is used" in capsys.readouterr().out
    # a missing image is reported (exit 1)
    (g / "images" / f"{GoldenIndex.load(g).entry(live)['approved'][0]['png']}.png").unlink()
    assert farm("goldens", "--goldens", g) == 1
    assert "missing image" in capsys.readouterr().out


def test_broken_index_is_one_sentence(tmp_path, capsys):
    store, g = tmp_path / "store", tmp_path / "goldens"
    run = make_run(store, {K1: image(1)})
    g.mkdir()
    (g / "index.jsonl").write_text('{"format": "modelfarm.goldens/1"}\n{oops\n')
    assert farm("compare", run.id, "--out", store, "--goldens", g) == 2
    assert "index.jsonl:2: not valid JSON" in capsys.readouterr().err


def test_report_command_writes_the_folder(tmp_path, capsys):
    store, g = tmp_path / "store", tmp_path / "goldens"
    run = make_run(store, {K1: image(1), K2: image(2)})
    farm("approve", run.id, "--trace", K1, "--out", store, "--goldens", g)
    assert farm("report", run.id, "-o", tmp_path / "rep", "--out", store, "--goldens", g) == 0
    for name in ("index.html", "junit.xml", "summary.md", "results.json", "static/report.js", "static/report.css"):
        assert (tmp_path / "rep" / name).is_file(), name
    results = json.loads((tmp_path / "rep" / "results.json").read_text())
    assert results["counts"]["new"] == 1 and results["counts"]["pass"] == 1
    # the approve command printed in the report works as printed
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "farm approve " + run.id in html
    cmd = f"farm approve {run.id} --trace {shlex.quote(K2)} --out store --goldens goldens"
    assert cmd.replace("'", "&#39;") in html
    assert farm(*shlex.split(cmd)[1:]) == 0
    assert GoldenIndex.load(g).traces() == {K1, K2}
