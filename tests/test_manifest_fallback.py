"""Issue 16: sequence fallback lists in manifests (`sequences = ["Portrait", "Spin", "first"]`: the
first of these each model has, like `farm thumbnails`), and `farm retry` saying when the manifest
changed since the job was planned. No GL: planning reads models without rendering."""

from __future__ import annotations

import sys

import pytest

from farm.cli import main
from farm.plan.batches import expand_manifest, expand_plan
from farm.plan.manifest import ManifestError, ModelPlan, load_manifest
from farm.run.jobs import JobState
from farm.store import FolderStore
from renderer.samples import write_samples


@pytest.fixture
def models(tmp_path, monkeypatch):
    monkeypatch.delenv("FARM_OUT", raising=False)
    monkeypatch.chdir(tmp_path)
    write_samples(tmp_path / "models")  # crate: Stand Spin Death; effects: Stand Birth; filter_modes: Stand
    return tmp_path


def sequences_of(plan) -> dict:
    return {k.split("|")[0]: k.split("|")[1] for k in plan.traces}


def test_fallback_picks_the_first_sequence_each_model_has(models):
    (models / "job.toml").write_text('sequences = ["Portrait", "Spin", "Birth", "first"]\n'
                                     '[[models]]\npaths = ["models/*.mdx"]\n')
    plan = expand_manifest(load_manifest(models / "job.toml"))
    assert sequences_of(plan) == {"models/crate.mdx": "Spin", "models/effects.mdx": "Birth",
                                  "models/filter_modes.mdx": "Stand"}  # "first": its first sequence
    # a list without "first" still renders each entry
    (models / "job.toml").write_text('sequences = ["Stand", "Spin"]\n[[models]]\npath = "models/crate.mdx"\n')
    keys = expand_manifest(load_manifest(models / "job.toml")).traces
    assert {k.split("|")[1] for k in keys} == {"Stand", "Spin"}


def test_fallback_survives_the_job_file_and_is_resolved_again(models):
    (models / "job.toml").write_text('sequences = ["spin", "first"]\n[[models]]\npath = "models/crate.mdx"\n')
    m = load_manifest(models / "job.toml")
    (plan,) = m.plans
    assert plan.sequence_fallback == ["spin", "first"]
    assert set(sequences_of(expand_plan(plan, [])).values()) == {"Spin"}  # case-insensitive, like thumbs
    again = ModelPlan.from_dict(plan.to_dict())
    assert again.sequence_fallback == ["spin", "first"] and sequences_of(expand_plan(again, [])) == {
        "models/crate.mdx": "Spin"}
    broken = expand_plan(ModelPlan.from_dict({**plan.to_dict(), "path": str(models / "missing.mdx")}), [])
    assert set(sequences_of(broken).values()) == {"spin"}  # unreadable: the first entry; its frames fail
    assert "does not load" in broken.unloadable["models/crate.mdx"]


def test_planning_reads_each_model_once_and_a_model_plan_reads_none(models):
    """A ModelPlan (made by the manifest, or from a job file on a retry) opens no model file;
    planning opens each model once, its fallback list resolved from that one read."""
    (models / "job.toml").write_text('sequences = ["Portrait", "Spin", "first"]\n'
                                     '[[models]]\npaths = ["models/*.mdx"]\n')
    opened = []
    folder = str(models / "models")
    sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" and WATCH
                     and str(args[0]).startswith(folder) else None)
    WATCH.append(1)
    try:
        m = load_manifest(models / "job.toml")
        ModelPlan.from_dict(m.plans[0].to_dict())
        assert opened == []
        plan = expand_manifest(m)
    finally:
        WATCH.clear()
    assert sorted(opened) == sorted(p.path for p in m.plans) and len(m.plans) == 3
    assert sequences_of(plan)["models/crate.mdx"] == "Spin" and sequences_of(plan)["models/effects.mdx"] == "Stand"


WATCH: list = []  # non-empty while the audit hooks here count opens (a hook cannot be removed)


def test_travelling_inputs_are_published_from_the_read_that_planned_each_model(models, monkeypatch):
    """Issue 35 item 10: with inputs that travel, `farm run` publishes each model's inputs from the one
    read that planned it (farm.run.inputs.Publisher): the coordinator opens each model file once,
    and the workers read the store."""
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)
    monkeypatch.setenv("FARM_INPUT_CACHE", str(models / "cache"))
    monkeypatch.setenv("FARM_RENDERER", "synthetic")
    (models / "job.toml").write_text('size = "16x16"\ntimestamps = [0]\n[[models]]\npaths = ["models/*.mdx"]\n')
    opened = []
    folder = str(models / "models")
    sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" and WATCH
                     and str(args[0]).startswith(folder) and str(args[0]).endswith(".mdx") else None)
    WATCH.append(1)
    try:
        assert main(["run", "job.toml", "--out", "store", "--job-id", "j", "--workers", "1", "--no-compare",
                     "--no-progress", "--inputs", "travel"]) == 0
    finally:
        WATCH.clear()
    job = JobState.load("j", models / "store")
    assert job.batches and all(b.get("inputs") for b in job.batches.values())
    assert job.data["runs"][-1]["inputs"]["models"] == 3
    assert sorted(opened) == sorted(str(p) for p in (models / "models").glob("*.mdx"))  # once each


def test_first_must_end_the_list(models):
    (models / "job.toml").write_text('sequences = ["first", "Stand"]\n[[models]]\npath = "models/crate.mdx"\n')
    with pytest.raises(ManifestError, match='"first" ends a fallback list'):
        load_manifest(models / "job.toml")


def test_retry_says_when_the_manifest_changed(models, capsys):
    manifest = models / "job.toml"
    manifest.write_text('sequences = ["Stand"]\n[[models]]\npath = "models/crate.mdx"\n')
    m = load_manifest(manifest)
    job = JobState.create(FolderStore(models / "store"), m, expand_manifest(m), "j1")
    job.save(force=True)
    assert main(["retry", "j1", "--failed", "--out", "store"]) == 1  # pending frames: nothing failed to rerun
    assert "changed since" not in capsys.readouterr().err
    manifest.write_text('sequences = ["Stand", "Spin"]\n[[models]]\npath = "models/crate.mdx"\n')
    assert main(["retry", "latest", "--failed", "--out", "store"]) == 1
    err = capsys.readouterr().err
    assert "note: the manifest job.toml changed since job j1 was planned" in err and "farm run job.toml" in err
    manifest.unlink()
    main(["retry", "j1", "--failed", "--out", "store"])
    assert "is gone" in capsys.readouterr().err
