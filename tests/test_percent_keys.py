"""Percent timestamps keep a stable trace identity (issue 24, item 9): a manifest's "50%" is keyed by
the fraction (``...|Spin|50%|...``) with its resolved ms in the trace record, so a sequence whose
length changed is the same trace, changed (not one removed and one added); goldens approved under the
ms key the planner made before still answer, and approving moves them to the new key, images and
records as they were."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from golden_runs import image, make_run, noisy  # noqa: E402

from farm import goldens as G  # noqa: E402
from farm.cli import main  # noqa: E402
from farm.compare.runs import compare_run, diff_runs  # noqa: E402
from farm.plan.batches import Batch, expand_manifest  # noqa: E402
from farm.plan.keys import TraceKeyError, legacy_key, parse_key, trace_key_for  # noqa: E402
from farm.plan.manifest import load_manifest  # noqa: E402
from farm.report.junit import case_names  # noqa: E402
from farm.report.model import sort_traces  # noqa: E402
from farm.run.jobs import run_job  # noqa: E402
from farm.settings import RenderSettings  # noqa: E402
from renderer.formats import load_model, save_model  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BY = "tester"
REST = "auto|32x32|msaa0|team0|transparent"
PCT = f"models/crate.mdx|Spin|50%|{REST}"  # the crate's Spin is 2000 ms long: 50% is 1000 ms
LEGACY = f"models/crate.mdx|Spin|1000ms|{REST}"  # what the planner keyed it as before


# --- keys -------------------------------------------------------------------------------------

@pytest.mark.parametrize("time, text", [("50%", "50%"), ("50.0%", "50%"), (" 12.5 %", "12.5%"), ("0%", "0%"),
                                        ("100%", "100%"), ("33.3%", "33.3%")])
def test_a_fraction_is_keyed_as_such_and_round_trips(time, text):
    rs = RenderSettings(width=64, height=32, msaa=4, team=2, background="#102030", missing_textures="white",
                        lighting="farm-v0", lights="model", events="model")
    key = trace_key_for("models/a|b%.mdx", "Attack|2", time, rs)
    assert key == f"models/a%7Cb%25.mdx|Attack%7C2|{text}|auto|64x32|msaa4|team2|#102030|white|lighting=farm-v0" \
                  f"|lights=model|events=model"
    k = parse_key(key)
    assert str(k) == key and (k.time_pct, k.time_ms) == (text, None)  # the ms is the trace record's
    assert (k.model, k.sequence, k.width, k.height, k.msaa, k.team) == ("models/a|b%.mdx", "Attack|2", 64, 32, 4, 2)
    assert k.rest == key.split("|", 1)[1]


def test_ms_keys_are_as_before():
    key = "models/crate.mdx|Stand|500ms|auto|128x128|msaa0|team0|transparent"
    assert trace_key_for("models/crate.mdx", "Stand", 500, RenderSettings(width=128, height=128)) == key
    k = parse_key(key)
    assert (k.time_ms, k.time_pct, str(k)) == (500, None, key) and legacy_key(key, 500) is None
    committed = G.GoldenIndex.load(ROOT / "goldens").traces()
    assert committed and all(str(parse_key(t)) == t and parse_key(t).time_ms is not None for t in committed)


@pytest.mark.parametrize("time", ["50.0%", "%", "-5%", "5e1%", "50%ms", "050%", "50 %"])
def test_a_fraction_not_spelled_as_keys_spell_it_is_not_a_key(time):
    with pytest.raises(TraceKeyError, match="is not a trace key"):
        parse_key(f"m.mdx|Stand|{time}|{REST}")


def test_legacy_key_is_the_ms_key_of_the_frame():
    assert legacy_key(PCT, 1000) == LEGACY
    assert legacy_key(PCT, None) is None and legacy_key(LEGACY, 1000) is None and legacy_key("not a key", 3) is None


def test_consumers_take_the_ms_from_the_trace_record():
    assert case_names(PCT) == ("models.crate_mdx", f"Spin|50%|{REST}")
    late, early = f"models/crate.mdx|Spin|100%|{REST}", f"models/crate.mdx|Spin|250ms|{REST}"
    traces = [{"key": k, "status": "pass", "model": "models/crate.mdx", "sequence": "Spin", "time_ms": ms}
              for k, ms in ((late, 2000), (early, 250))]
    assert [t["key"] for t in sort_traces(traces)] == [early, late]  # by ms, not by the key's text


# --- planning ---------------------------------------------------------------------------------

@pytest.fixture
def job(tmp_path) -> Path:
    write_samples(tmp_path / "models")
    (tmp_path / "job.toml").write_text('name = "pct"\nsize = "32x32"\nsequences = ["Spin"]\ntimestamps = [0, "50%"]\n'
                                       'models = ["models/crate.mdx"]\n')
    return tmp_path


def lengthen(path: Path, sequence: str, length_ms: int) -> None:
    """Give a model's sequence a new length (its keys stay where they were)."""
    model = load_model(path)
    seq = next(s for s in model.sequences if s.name == sequence)
    seq.interval = (seq.interval[0], seq.interval[0] + length_ms)
    save_model(model, path)


def test_a_longer_sequence_keeps_the_trace_key(job):
    before = expand_manifest(load_manifest(job / "job.toml"))
    lengthen(job / "models" / "crate.mdx", "Spin", 2900)
    after = expand_manifest(load_manifest(job / "job.toml"))
    zero = f"models/crate.mdx|Spin|0ms|{REST}"
    assert set(before.traces) == set(after.traces) == {zero, PCT}
    assert (before.traces[PCT]["time_ms"], after.traces[PCT]["time_ms"]) == (1000, 1450)
    (batch,) = after.batches
    assert (batch.keys, batch.times) == ([zero, PCT], [0, 1450])
    assert Batch.from_dict(batch.to_dict()) == batch  # job files and Celery messages carry it as they are


# --- runs: diff and goldens (real renders) --------------------------------------------------------

@pytest.fixture
def runs(job):
    """Run "base", lengthen the crate's Spin from 2000 to 2900 ms, run "head"."""
    out = job / "out"
    base = run_job(job / "job.toml", out=out, workers=1, broker="local", progress=False, job_id="base")
    lengthen(job / "models" / "crate.mdx", "Spin", 2900)
    head = run_job(job / "job.toml", out=out, workers=1, broker="local", progress=False, job_id="head")
    return job, base, head


@pytest.mark.gl
def test_diff_of_a_longer_sequence_is_one_trace_changed(runs, capsys):
    job, base, head = runs
    assert set(base.traces) == set(head.traces) and PCT in head.traces
    assert (base.traces[PCT]["time_ms"], head.traces[PCT]["time_ms"]) == (1000, 1450)
    r = diff_runs(base, head, write=False, heatmaps=False)
    assert {k: t["status"] for k, t in r["traces"].items()} == {f"models/crate.mdx|Spin|0ms|{REST}": "unchanged",
                                                                 PCT: "changed"}
    (changed,) = r["traces"][PCT]["inputs_changed"]
    assert changed["kind"] == "model" and changed["base"] != changed["head"]
    assert main(["diff", "base", "head", "--out", str(job / "out")]) == 1
    text = capsys.readouterr().out
    assert "CHANGED: 1 changed" in text and "added" not in text and "removed" not in text, text
    assert f"model {changed['asset']}: changed (" in text


@pytest.mark.gl
def test_goldens_follow_the_trace_when_its_sequence_gets_longer(runs, capsys):
    job, base, head = runs
    goldens = job / "goldens"
    rec, skipped = G.approve(goldens, base, sorted(base.traces), by=BY)
    assert rec and not skipped
    res = compare_run(head, goldens, write=False, heatmaps=False)
    assert res["counts"]["new"] == 0 and res["counts"]["fail"] == 1  # changed, not a new trace
    assert res["traces"][PCT]["status"] == "fail" and "SSIM" in res["traces"][PCT]["reason"]
    assert not G.stale(goldens, head.traces).anything  # the old golden is this trace's, not stale


# --- goldens approved under the legacy ms key -----------------------------------------------------

def test_goldens_under_the_legacy_ms_key_still_compare_and_move_on_approval(tmp_path):
    goldens, store = tmp_path / "goldens", tmp_path / "store"
    old = make_run(store, {LEGACY: image(1)}, name="old")  # a run of the planner before: keyed in ms
    G.approve(goldens, old, [LEGACY], by="someone")
    legacy_line = G.GoldenIndex.load(goldens).entry(LEGACY)
    image_file = G.GoldenIndex.load(goldens).image_path(legacy_line["approved"][0]["png"])
    image_bytes = image_file.read_bytes()

    new = make_run(store, {PCT: image(1)}, name="new", times={PCT: 1000})
    t = compare_run(new, goldens, write=False, heatmaps=False)["traces"][PCT]
    assert (t["status"], t["match"], t["golden"]["by"]) == ("pass", "exact", "someone")
    near = make_run(store, {PCT: noisy(image(1), 2)}, name="near", times={PCT: 1000})
    assert compare_run(near, goldens, write=False, heatmaps=False)["traces"][PCT]["match"] == "similar"
    moved = make_run(store, {PCT: image(1)}, name="moved", times={PCT: 1450})  # a longer sequence: not that frame
    assert compare_run(moved, goldens, write=False, heatmaps=False)["traces"][PCT]["status"] == "new"
    # legacy lines stay until the trace has its own line: not stale
    assert not G.stale(goldens, [PCT], {PCT: LEGACY}).entries and G.stale(goldens, [PCT]).entries

    # approving writes the new key, with the approval as it was (same image file, by, at, run)
    rec, _ = G.approve(goldens, new, [PCT], by=BY)
    index = G.GoldenIndex.load(goldens)
    assert rec["changes"][0]["before"] is None and index.entry(PCT)["approved"] == legacy_line["approved"]
    assert image_file.read_bytes() == image_bytes and len(list(index.images_dir.iterdir())) == 1
    report = G.stale(goldens, [PCT], {PCT: LEGACY})
    assert report.entries == [(LEGACY, G.GENERIC)]
    G.prune(goldens, [PCT], by=BY, legacy={PCT: LEGACY})
    assert G.GoldenIndex.load(goldens).traces() == {PCT} and image_file.read_bytes() == image_bytes
    assert compare_run(new, goldens, write=False, heatmaps=False)["traces"][PCT]["match"] == "exact"


def test_a_decision_on_a_legacy_golden_starts_from_its_line(tmp_path):
    """--add keeps the legacy approvals; an environment's legacy line answers in that environment."""
    goldens, store = tmp_path / "goldens", tmp_path / "store"
    old = make_run(store, {LEGACY: image(1)}, name="old")
    G.approve(goldens, old, [LEGACY], by="someone", env_scope=True)
    new = make_run(store, {PCT: image(1)}, name="new", times={PCT: 1000})
    t = compare_run(new, goldens, write=False, heatmaps=False)["traces"][PCT]
    assert (t["status"], t["golden"]["scope"]) == ("pass", "env")
    other = make_run(store, {PCT: image(2)}, name="other", times={PCT: 1000})
    G.approve(goldens, other, [PCT], by=BY, env_scope=True, add=True)
    (line,) = [e for (trace, _), e in G.GoldenIndex.load(goldens).entries.items() if trace == PCT]
    assert [a["by"] for a in line["approved"]] == ["someone", BY]
    assert compare_run(new, goldens, write=False, heatmaps=False)["traces"][PCT]["status"] == "pass"
