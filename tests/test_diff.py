"""`farm diff BASE HEAD`: changed, added, removed and unchanged traces of two runs, and the command."""

from __future__ import annotations

import json

from golden_runs import NVIDIA, broken, image, key, make_run, noisy

from farm.cli import main
from farm.compare.runs import diff_runs

SAME, NEAR, CHANGED, GONE, ADDED, ERR = (key(t=t) for t in (0, 100, 200, 300, 400, 500))


def runs(tmp_path, head_gl=None):
    base = make_run(tmp_path / "store", {SAME: image(1), NEAR: image(2), CHANGED: image(3), GONE: image(4),
                                         ERR: image(5)}, name="base")
    head = make_run(tmp_path / "store", {SAME: image(1), NEAR: noisy(image(2), 2), CHANGED: broken(image(3)),
                                         ADDED: image(6), ERR: "the model did not load"}, name="head", gl=head_gl)
    return base, head


def test_diff_statuses(tmp_path):
    base, head = runs(tmp_path)
    r = diff_runs(base, head)
    st = {k: (t["status"], t["match"]) for k, t in r["traces"].items()}
    assert st == {SAME: ("unchanged", "exact"), NEAR: ("unchanged", "similar"), CHANGED: ("changed", None),
                  GONE: ("removed", None), ADDED: ("added", None), ERR: ("error", None)}
    assert r["verdict"] == "changed"
    assert r["counts"] == {"unchanged": 2, "changed": 1, "added": 1, "removed": 1, "error": 1, "total": 6}
    c = r["traces"][CHANGED]
    assert c["metrics"]["pixels_over"] > 0.001 and c["golden"]["run"] == base.id
    assert (head.store.root / c["diff_image"]).is_file() and (head.store.root / c["ssim_image"]).is_file()
    assert "did not load" in r["traces"][ERR]["reason"]
    assert (head.store.job_dir(head.id) / f"diff-{base.id}.json").is_file()
    # the same run against itself: no changes
    same = diff_runs(base, base, write=False)
    assert same["verdict"] == "same" and same["counts"]["unchanged"] == 5


def test_diff_names_both_environments(tmp_path):
    base, head = runs(tmp_path, head_gl=NVIDIA)
    reason = diff_runs(base, head)["traces"][CHANGED]["reason"]
    assert "llvmpipe" in reason and "NVIDIA" in reason


def test_farm_diff_command(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base, head = runs(tmp_path)
    store = tmp_path / "store"
    assert main(["diff", base.id, head.id, "--out", str(store), "-o", "pr"]) == 1
    out = capsys.readouterr().out
    assert f"diff {base.id} -> {head.id}: CHANGED: 1 changed, 1 added, 1 removed, 1 error, 2 unchanged" in out
    assert f"changed  {CHANGED}" in out and "report: pr/index.html" in out
    results = json.loads((tmp_path / "pr" / "results.json").read_text())
    assert results["kind"] == "diff" and results["base"]["job"] == base.id
    assert "modelfarm diff" in (tmp_path / "pr" / "summary.md").read_text()
    assert main(["diff", base.id, base.id, "--out", str(store)]) == 0
    assert "no changes" in capsys.readouterr().out
    # runs in different stores, and by the path of their job files
    other = make_run(tmp_path / "other", {SAME: image(1)}, name="other")
    assert main(["diff", str(store / "jobs" / f"{base.id}.json"), other.id, "--head-out",
                 str(tmp_path / "other")]) == 1
    assert "4 removed" in capsys.readouterr().out
