"""The golden index (format, round trip, environments) and every comparison status: pass (exact and
similar), fail, new, rejected, error, environment-specific goldens; approve, reject, undo, stale."""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from pathlib import Path

import pytest
from golden_runs import INTEL, LLVMPIPE, NVIDIA, broken, image, key, make_run, noisy

from farm import goldens as G
from farm.compare.runs import compare_run, results_for
from farm.goldens import GENERIC, GoldenError, GoldenIndex, env_key

K1, K2, K3 = key(t=0), key(t=500), key("models/b.mdx", "Walk", 100)
BY = "Tess Tester <tess@example.org>"


@pytest.fixture
def gdir(tmp_path) -> Path:
    return tmp_path / "goldens"


def approve_all(gdir, job, **kw):
    rec, skipped = G.approve(gdir, job, sorted(job.traces), by=BY, **kw)
    assert not skipped
    return rec


# --- environments and digests


def test_env_key_names_renderer_driver_and_cpu():
    assert env_key(LLVMPIPE) == "llvmpipe (LLVM 15.0.6, 256 bits) / Mesa 22.3.6 / AuthenticAMD"
    assert env_key(INTEL) != env_key(LLVMPIPE)
    assert env_key(NVIDIA) == "NVIDIA GeForce RTX 3060-PCIe-SSE2 / NVIDIA 535.104.05 / GenuineIntel"
    assert env_key({**LLVMPIPE, "driver_version": "24.2.8"}) != env_key(LLVMPIPE)
    assert env_key({"renderer": "synthetic"}) == "synthetic / - / -"
    assert env_key(None) == "unknown"
    # what does not change the pixels does not change the key
    assert env_key({**LLVMPIPE, "platform": "osmesa", "backend": "osmesa"}) == env_key(LLVMPIPE)


def test_golden_digest_is_of_pixels_not_png_bytes(tmp_path, gdir):
    """The same pixels rendered with another trace (another machine, an edited but identical-looking
    model) are a different PNG but the same golden: an exact pass."""
    a = make_run(tmp_path / "a", {K1: image(1)}, model_hash="old")
    approve_all(gdir, a)
    b = make_run(tmp_path / "b", {K1: image(1)}, gl=INTEL, model_hash="new")
    assert a.traces[K1]["digest"] != b.traces[K1]["digest"]  # PNG bytes differ (trace chunk)
    r = compare_run(b, gdir)["traces"][K1]
    assert (r["status"], r["match"]) == ("pass", "exact")
    assert r["golden"]["digest"] == r["digest"]


# --- index text format


def test_index_is_sorted_one_line_per_trace_and_round_trips(tmp_path, gdir):
    frames = {key(f"models/m{i}.mdx", s, t): image(i + t) for i in (3, 1, 2) for s in ("Walk", "Stand")
              for t in (500, 0)}
    job = make_run(tmp_path / "s", frames)
    approve_all(gdir, job)
    G.approve(gdir, job, [key("models/m1.mdx", "Stand", 0)], by=BY, env_scope=True)
    text = (gdir / "index.jsonl").read_text()
    lines = text.splitlines()
    assert json.loads(lines[0]) == {"format": "modelfarm.goldens/1"}
    entries = [json.loads(x) for x in lines[1:]]
    assert len(entries) == len(frames) + 1  # one per trace, plus the environment-specific line
    keys = [(e["trace"], e["env"] != GENERIC, e["env"]) for e in entries]
    assert keys == sorted(keys)
    assert all(list(e) == ["trace", "env", "approved", "rejected"] for e in entries)
    assert all(list(e["approved"][0])[:7] == ["digest", "png", "size", "by", "at", "run", "gl"] for e in entries)
    # round trip: parse and write give the same text, whatever order the lines and keys came in
    index = GoldenIndex.load(gdir)
    assert index.text() == text
    shuffled = lines[1:]
    random.Random(7).shuffle(shuffled)
    shuffled = [json.dumps(dict(reversed(list(json.loads(x).items())))) for x in shuffled]
    again = GoldenIndex(gdir, GoldenIndex.parse("\n".join([lines[0], *shuffled])))
    assert again.text() == text
    # one more approval changes exactly one line
    job2 = make_run(tmp_path / "s2", {key("models/m2.mdx", "Walk", 0): broken(image(2))})
    G.approve(gdir, job2, list(job2.traces), by=BY)
    new_lines = (gdir / "index.jsonl").read_text().splitlines()
    assert len(new_lines) == len(lines)
    assert sum(a != b for a, b in zip(lines, new_lines, strict=True)) == 1


@pytest.mark.parametrize("bad, message", [
    ('{"format": "modelfarm.goldens/9"}', "format"),
    ('{"format": "modelfarm.goldens/1"}\nnot json', ":2: not valid JSON"),
    ('{"format": "modelfarm.goldens/1"}\n{"trace": "a", "env": "*", "approved": [{"digest": "xyz"}]}',
     ":2: approved[0] needs 'digest'"),
    ('{"format": "modelfarm.goldens/1"}\n{"trace": "a", "env": "*"}\n{"trace": "a", "env": "*"}',
     ":3: a second line"),
    ('{"format": "modelfarm.goldens/1"}\n{"env": "*"}', ":2: 'trace' must be"),
])
def test_bad_index_lines_name_the_line(gdir, bad, message):
    gdir.mkdir()
    (gdir / "index.jsonl").write_text(bad)
    with pytest.raises(GoldenError, match=re.escape(message)):
        GoldenIndex.load(gdir)


# --- status transitions


def test_new_then_pass_then_fail_then_approved_change(tmp_path, gdir):
    run1 = make_run(tmp_path / "r1", {K1: image(1), K2: image(2)})
    res = compare_run(run1, gdir)
    assert {t["status"] for t in res["traces"].values()} == {"new"}
    assert res["verdict"] == "fail" and res["compared"] == 0
    assert any("nothing was compared" in p for p in res["problems"])
    assert not any(t["status"] == "pass" for t in res["traces"].values())  # new is never passed

    approve_all(gdir, run1)
    run2 = make_run(tmp_path / "r2", {K1: image(1), K2: noisy(image(2), 2)})
    res = compare_run(run2, gdir)
    t1, t2 = res["traces"][K1], res["traces"][K2]
    assert (t1["status"], t1["match"]) == ("pass", "exact")
    assert (t2["status"], t2["match"]) == ("pass", "similar")
    assert t2["metrics"]["ssim"] >= 0.99 and t2["metrics"]["max_diff"] <= 2
    assert res["verdict"] == "pass" and res["counts"]["pass"] == 2 and res["compared"] == 2

    run3 = make_run(tmp_path / "r3", {K1: image(1), K2: broken(image(2))})
    res = compare_run(run3, gdir)
    t2 = res["traces"][K2]
    assert t2["status"] == "fail" and res["verdict"] == "fail"
    assert "pixels" in t2["reason"] and t2["metrics"]["pixels_over"] > 0.001
    assert t2["golden"]["by"] == BY and t2["golden"]["run"] == run1.id
    # every metric and the thresholds are stored with the result
    stored = json.loads((run3.store.job_dir(run3.id) / "comparison.json").read_text())
    assert set(stored["traces"][K2]["metrics"]) >= {"ssim", "ssim_rgb", "ssim_alpha", "pixels_over", "max_diff",
                                                    "thresholds", "digest", "golden_digest"}
    assert stored["traces"][K2]["thresholds"] == {"min_ssim": 0.99, "pixel_delta": 16, "max_pixels_over": 0.001}
    assert (run3.store.root / stored["traces"][K2]["diff_image"]).is_file()
    assert (run3.store.root / stored["traces"][K2]["ssim_image"]).is_file()

    # approving the change (replace) makes it the golden; the old image no longer passes exactly
    rec, _ = G.approve(gdir, run3, [K2], by=BY)
    assert rec["changes"][0]["before"]["approved"][0]["digest"] != rec["changes"][0]["after"]["approved"][0]["digest"]
    assert compare_run(run3, gdir)["verdict"] == "pass"
    assert compare_run(run1, gdir)["traces"][K2]["status"] == "fail"


def test_thresholds_come_from_the_run(tmp_path, gdir):
    base = make_run(tmp_path / "a", {K1: image(1), K2: image(2)})
    approve_all(gdir, base)
    loose = {K2: {"min_ssim": -1.0, "max_pixels_over": 0.5}}
    run = make_run(tmp_path / "b", {K1: broken(image(1)), K2: broken(image(2))}, thresholds=loose)
    res = compare_run(run, gdir)
    assert res["traces"][K1]["status"] == "fail"
    assert res["traces"][K2]["status"] == "pass"
    assert res["traces"][K2]["thresholds"]["max_pixels_over"] == 0.5
    assert res["traces"][K2]["metrics"]["thresholds"]["min_ssim"] == -1.0


def test_rejected_digest_fails_with_who_and_why(tmp_path, gdir):
    good = make_run(tmp_path / "a", {K1: image(1)})
    approve_all(gdir, good)
    bad = make_run(tmp_path / "b", {K1: broken(image(1))})
    rec, _ = G.reject(gdir, bad, [K1], by=BY, reason="the lid is inside out (bug 12)")
    assert rec["action"] == "reject"
    again = make_run(tmp_path / "c", {K1: broken(image(1))}, gl=INTEL)  # same pixels, another machine
    t = compare_run(again, gdir)["traces"][K1]
    assert t["status"] == "rejected"
    assert "bug 12" in t["reason"] and BY in t["reason"] and bad.id in t["reason"]
    assert t["rejected"]["scope"] == "generic"
    # rejecting an approved image takes it out of the approved list
    G.reject(gdir, good, [K1], by=BY)
    assert compare_run(good, gdir)["traces"][K1]["status"] == "rejected"
    assert GoldenIndex.load(gdir).entry(K1)["approved"] == []


def test_error_traces_fail_the_run(tmp_path, gdir):
    base = make_run(tmp_path / "a", {K1: image(1), K2: image(2), K3: image(3)})
    approve_all(gdir, base)
    run = make_run(tmp_path / "b", {K1: image(1), K2: "Segfault in the driver", K3: None})
    res = compare_run(run, gdir)
    assert res["traces"][K2]["status"] == "error" and "Segfault" in res["traces"][K2]["reason"]
    assert res["traces"][K3]["status"] == "error" and "not rendered" in res["traces"][K3]["reason"]
    assert res["verdict"] == "fail"
    # a missing image in the store is an error too, not a crash
    gone = make_run(tmp_path / "c", {K1: image(1)})
    gone.store.image_path(gone.traces[K1]["digest"]).unlink()
    assert compare_run(gone, gdir)["traces"][K1]["status"] == "error"


def test_new_traces_fail_unless_allowed_and_nothing_compared_fails_unless_all_new_allowed(tmp_path, gdir):
    base = make_run(tmp_path / "a", {K1: image(1)})
    approve_all(gdir, base)
    run = make_run(tmp_path / "b", {K1: image(1), K2: image(2)})
    assert compare_run(run, gdir)["verdict"] == "fail"
    res = compare_run(run, gdir, allow_new=True)
    assert res["verdict"] == "pass" and res["counts"]["new"] == 1
    only_new = make_run(tmp_path / "c", {K3: image(3)})
    res = compare_run(only_new, gdir, allow_new=True)  # issue 16: every trace new and allowed: a pass, noted
    assert res["verdict"] == "pass" and res["compared"] == 0 and "nothing was compared" in res["notes"][0]
    assert compare_run(only_new, gdir)["verdict"] == "fail"
    only_errors = make_run(tmp_path / "d", {K3: "cannot read"})
    res = compare_run(only_errors, gdir, allow_new=True)
    assert res["verdict"] == "fail" and res["compared"] == 0


def test_environment_specific_golden_first_then_generic(tmp_path, gdir):
    llvm = make_run(tmp_path / "a", {K1: image(1), K2: image(2)})
    approve_all(gdir, llvm)  # generic
    # the GPU renders K1 quite differently: it gets a golden of its own
    gpu = make_run(tmp_path / "b", {K1: broken(image(1)), K2: image(2)}, gl=NVIDIA)
    res = compare_run(gpu, gdir)
    assert res["traces"][K1]["status"] == "fail"
    assert env_key(LLVMPIPE) in res["traces"][K1]["reason"] and env_key(NVIDIA) in res["traces"][K1]["reason"]
    rec, _ = G.approve(gdir, gpu, [K1], by=BY, env_scope=True)
    assert rec["changes"][0]["env"] == env_key(NVIDIA)
    res = compare_run(gpu, gdir)
    t1, t2 = res["traces"][K1], res["traces"][K2]
    assert (t1["status"], t1["golden"]["scope"], t1["golden"]["scope_env"]) == ("pass", "env", env_key(NVIDIA))
    assert (t2["status"], t2["golden"]["scope"]) == ("pass", "generic")  # no GPU golden: the generic one
    # a near copy of the GPU image passes against the GPU golden, not the generic one
    gpu2 = make_run(tmp_path / "c", {K1: noisy(broken(image(1)))}, gl=NVIDIA)
    t = compare_run(gpu2, gdir)["traces"][K1]
    assert (t["status"], t["match"], t["golden"]["scope"]) == ("pass", "similar", "env")
    # llvmpipe still uses the generic golden; the GPU's image is not approved for it
    assert compare_run(llvm, gdir)["traces"][K1]["golden"]["scope"] == "generic"
    llvm_bad = make_run(tmp_path / "d", {K1: broken(image(1))})
    assert compare_run(llvm_bad, gdir)["traces"][K1]["status"] == "fail"
    # an environment's own rejection of the generic golden's image wins over the generic approval
    G.reject(gdir, llvm, [K1], by=BY, env_scope=True, reason="wrong on this CPU")
    t = compare_run(llvm, gdir)["traces"][K1]
    assert t["status"] == "rejected" and t["rejected"]["scope"] == "env"


def test_several_approved_images_and_the_closest_decides(tmp_path, gdir):
    a = make_run(tmp_path / "a", {K1: image(1)})
    b = make_run(tmp_path / "b", {K1: broken(image(1))})
    approve_all(gdir, a)
    G.approve(gdir, b, [K1], by=BY, add=True)
    assert len(GoldenIndex.load(gdir).entry(K1)["approved"]) == 2
    for src in (image(1), broken(image(1))):
        assert compare_run(make_run(tmp_path / "x", {K1: src}), gdir)["traces"][K1]["match"] == "exact"
    near_a = compare_run(make_run(tmp_path / "y", {K1: noisy(image(1))}), gdir)["traces"][K1]
    assert near_a["status"] == "pass"
    assert near_a["golden"]["digest"] == GoldenIndex.load(gdir).entry(K1)["approved"][0]["digest"]


# --- approving


def test_approve_copies_exactly_the_stored_bytes_and_records_who_when_what(tmp_path, gdir):
    run = make_run(tmp_path / "a", {K1: image(1, alpha=True)})
    rec = approve_all(gdir, run)
    entry = GoldenIndex.load(gdir).entry(K1)
    a = entry["approved"][0]
    stored = run.store.read_image(run.traces[K1]["digest"])
    golden = (gdir / "images" / f"{a['png']}.png").read_bytes()
    assert golden == stored  # the very bytes the run stored and the report showed
    assert hashlib.sha256(golden).hexdigest() == a["png"] == run.traces[K1]["digest"]
    assert a["by"] == BY and a["run"] == run.id and a["gl"] == LLVMPIPE and a["size"] == [32, 32]
    assert a["at"].endswith("+00:00")
    log = [json.loads(x) for x in (gdir / "approvals.jsonl").read_text().splitlines()]
    assert log[-1]["id"] == rec["id"] == 1 and log[-1]["action"] == "approve" and log[-1]["by"] == BY
    assert log[-1]["changes"][0]["before"] is None
    # approving the same image again changes nothing
    assert G.approve(gdir, run, [K1], by="someone else")[0] is None


def test_approve_selects_by_pattern_and_status(tmp_path, gdir):
    base = make_run(tmp_path / "a", {K1: image(1), K2: image(2)})
    G.approve(gdir, base, [K1, K2], by=BY)
    run = make_run(tmp_path / "b", {K1: image(1), K2: broken(image(2)), K3: image(3)})
    results = compare_run(run, gdir)
    assert G.select_traces(run, statuses={"new"}, results=results) == [K3]
    assert G.select_traces(run, statuses={"fail"}, results=results) == [K2]
    assert G.select_traces(run, ["models/a.mdx|*"]) == sorted([K1, K2])
    assert G.select_traces(run, ["*|Walk|*"]) == [K3]
    assert G.select_traces(run, [K2]) == [K2]  # an exact key with '|' works as a pattern too


def test_skipped_traces_say_why(tmp_path, gdir):
    run = make_run(tmp_path / "a", {K1: "the loader failed", K2: image(2)})
    rec, skipped = G.approve(gdir, run, [K1, K2, "nope"], by=BY)
    assert len(rec["changes"]) == 1
    assert any("did not render" in s and "the loader failed" in s for s in skipped)
    assert any("not a trace" in s for s in skipped)


def test_undo_reverses_the_last_decision_then_the_one_before(tmp_path, gdir):
    r1 = make_run(tmp_path / "a", {K1: image(1), K2: image(2)})
    r2 = make_run(tmp_path / "b", {K1: broken(image(1))})
    approve_all(gdir, r1)
    first = (gdir / "index.jsonl").read_text()
    G.approve(gdir, r2, [K1], by=BY)
    G.reject(gdir, r2, [K1], by=BY)
    rec, notes = G.undo(gdir, by=BY)  # the rejection
    assert rec["undoes_action"] == "reject" and not notes
    assert GoldenIndex.load(gdir).entry(K1)["approved"][0]["digest"] == compare_run(r2, gdir)["traces"][K1]["digest"]
    rec, _ = G.undo(gdir, by=BY)  # the second approval
    assert rec["undoes_action"] == "approve"
    assert (gdir / "index.jsonl").read_text() == first
    rec, _ = G.undo(gdir, by=BY)  # the first approval: back to nothing
    assert GoldenIndex.load(gdir).entries == {}
    assert G.undo(gdir, by=BY) == (None, ["nothing to undo"])
    actions = [json.loads(x)["action"] for x in (gdir / "approvals.jsonl").read_text().splitlines()]
    assert actions == ["approve", "approve", "reject", "undo", "undo", "undo"]


def test_undo_leaves_lines_changed_since_alone(tmp_path, gdir):
    r1 = make_run(tmp_path / "a", {K1: image(1), K2: image(2)})
    r2 = make_run(tmp_path / "b", {K1: broken(image(1))})
    approve_all(gdir, r1)
    G.approve(gdir, r2, [K1], by=BY)
    # someone edits K1 by hand (a merge): the undo of the first approval must not clobber it
    index = GoldenIndex.load(gdir)
    log = index.log()
    # drop the second approval from the log, as if it had been made in another branch
    (gdir / "approvals.jsonl").write_text(json.dumps(log[0]) + "\n")
    rec, notes = G.undo(gdir, by=BY)
    assert [c["trace"] for c in rec["changes"]] == [K2]
    assert any(K1 in n and "changed again" in n for n in notes)
    assert GoldenIndex.load(gdir).entry(K1) is not None


def test_concurrent_approvals_all_land(tmp_path, gdir):
    keys = [key(t=t) for t in range(0, 1600, 100)]
    run = make_run(tmp_path / "a", {k: image(i) for i, k in enumerate(keys)})
    threads = [threading.Thread(target=G.approve, args=(gdir, run, [k]), kwargs={"by": BY}) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert GoldenIndex.load(gdir).traces() == set(keys)
    assert len(GoldenIndex.load(gdir).log()) == len(keys)


def test_results_are_reused_until_the_index_or_the_run_changes(tmp_path, gdir):
    run = make_run(tmp_path / "a", {K1: image(1), K2: image(2)})
    G.approve(gdir, run, [K1], by=BY)
    first = results_for(run, gdir)
    assert results_for(run, gdir)["created"] == first["created"]
    assert results_for(run, gdir)["traces"][K2]["status"] == "new"
    G.approve(gdir, run, [K2], by=BY)
    assert results_for(run, gdir)["traces"][K2]["status"] == "pass"


# --- stale goldens


def test_stale_lists_and_prune_removes_unused_goldens(tmp_path, gdir):
    run = make_run(tmp_path / "a", {K1: image(1), K2: image(2), K3: image(3)})
    approve_all(gdir, run)
    (gdir / "images" / ("0" * 64 + ".png")).write_bytes(b"stray")
    report = G.stale(gdir, [K1, K2])
    assert report.entries == [(K3, GENERIC)]
    assert [p.name for p in report.images] == ["0" * 64 + ".png"]
    rec, removed = G.prune(gdir, [K1, K2], by=BY)
    assert rec["action"] == "prune" and len(removed) == 2  # the stray file and K3's image
    assert GoldenIndex.load(gdir).traces() == {K1, K2}
    assert not G.stale(gdir, [K1, K2]).anything
    rec, notes = G.undo(gdir, by=BY)  # the line comes back; its image was pruned, and the note says so
    assert GoldenIndex.load(gdir).traces() == {K1, K2, K3}
    assert any("restore it from version control" in n for n in notes)
