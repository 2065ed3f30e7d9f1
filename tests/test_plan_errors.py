"""Issue 24 item 6: what a retry cannot fix is found when the job is planned, before anything renders.

A sequence the manifest names that a model does not have is a manifest error naming the file, the
line of that `sequences` entry, the model and the nearest names it has (fallback lists and "all"
keep working). A model that does not load is reported as "<model> does not load: <the loader's
sentence>"; its frames fail as planned (nothing renders them), the hints say to fix the model,
never `farm retry`, and `farm retry --failed` says a retry cannot fix it (it plans the model again
once it loads)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from farm.cli import main
from farm.plan.batches import expand_manifest
from farm.plan.causes import UNLOADABLE
from farm.plan.manifest import ManifestError, load_manifest
from farm.run.jobs import JobState
from farm.store import FolderStore as Store
from renderer.errors import FormatError
from renderer.formats import load_model
from renderer.samples import write_samples

# A chunk that claims more bytes than the file has: the loader refuses it with a FormatError.
BROKEN_MDX = b"MDLXVERS\x04\x00\x00\x00\x20\x03\x00\x00GEOS\xe8\x03\x00\x00" + bytes(8)


@pytest.fixture
def job_dir(tmp_path, monkeypatch) -> Path:
    write_samples(tmp_path / "models")
    (tmp_path / "models" / "broken.mdx").write_bytes(BROKEN_MDX)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FARM_RENDERER", "synthetic")  # the no-GL stand-in: these tests are about planning
    for var in ("FARM_BROKER_URL", "FARM_OUT", "FARM_GOLDENS"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def farm(*argv) -> int:
    return main([str(a) for a in argv])


def test_a_sequence_typo_is_a_manifest_error_at_its_line(job_dir, capsys):
    (job_dir / "job.toml").write_text('size = "32x32"\ntimestamps = [0]\n\n[[models]]\npath = "models/crate.mdx"\n'
                                      'sequences = ["Death", "Stnad"]\n')
    assert farm("run", "job.toml", "--out", "out", "--workers", "1", "--no-progress") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one sentence
    assert err.startswith("error: job.toml:6: [[models]] #1: 'sequences' names a sequence")
    assert "models/crate.mdx has no 'Stnad' (did you mean 'Stand'? it has 'Stand', 'Spin', 'Death')" in err
    assert "farm retry" not in err
    assert not (job_dir / "out").exists()  # nothing planned into the store, nothing rendered


def test_a_name_some_models_of_a_glob_lack_lists_them(job_dir):
    text = 'timestamps = [0]\nsequences = ["Spin"]\nmodels = ["models/*.mdx"]\n'
    (job_dir / "job.toml").write_text(text)
    with pytest.raises(ManifestError) as e:
        expand_manifest(load_manifest(job_dir / "job.toml"))
    msg = str(e.value)
    assert e.value.line == 2 and "'sequences' names a sequence that 2 models matched here do not have" in msg
    assert "models/effects.mdx has no 'Spin' (it has 'Stand', 'Birth')" in msg
    assert "models/filter_modes.mdx has no 'Spin'" in msg and "crate.mdx" not in msg
    assert "broken.mdx" not in msg  # a model that does not load is reported as that, not as lacking 'Spin'
    assert 'end it with "first"' in msg
    # what the message suggests, and "all", plan every model (the one that does not load: failed as planned)
    for sequences in ('["Spin", "first"]', '"all"'):
        (job_dir / "job.toml").write_text(text.replace('["Spin"]', sequences))
        plan = expand_manifest(load_manifest(job_dir / "job.toml"))
        assert {b.model_rel for b in plan.runnable()} == {"models/crate.mdx", "models/effects.mdx",
                                                          "models/filter_modes.mdx"}
        assert list(plan.unloadable) == ["models/broken.mdx"] and not plan.unknown
    # an index past the model's sequences is the same error
    (job_dir / "job.toml").write_text('sequences = [0, 7]\n[[models]]\npath = "models/crate.mdx"\n')
    with pytest.raises(ManifestError, match=r"job.toml:1: 'sequences' .* models/crate.mdx has no 7 \(it has"):
        expand_manifest(load_manifest(job_dir / "job.toml"))


def loader_sentence(path: Path) -> str:
    with pytest.raises(FormatError) as e:
        load_model(path, strict=False)
    return e.value.sentence()


def test_a_model_that_does_not_load_is_reported_as_that_and_not_sent_to_retry(job_dir, capsys):
    (job_dir / "job.toml").write_text('size = "32x32"\nsequences = "all"\ntimestamps = [0]\n'
                                      'models = ["models/crate.mdx", "models/broken.mdx"]\n')
    broken_key = "models/broken.mdx|-|0ms|auto|32x32|msaa0|team0|transparent"
    sentence = loader_sentence(job_dir / "models" / "broken.mdx")
    assert farm("run", "job.toml", "--out", "out", "--workers", "1", "--no-progress") == 1
    printed = capsys.readouterr()
    (job_id,) = Store(job_dir / "out").job_ids()
    job = JobState.load(job_id, job_dir / "out")
    t = job.traces[broken_key]
    assert t["status"] == "failed" and t["cause"] == UNLOADABLE
    assert t["error"] == f"models/broken.mdx does not load: {sentence}"
    assert job.keys("failed") == [broken_key] and job.counts()["done"] == 3  # crate: Stand, Spin, Death
    assert job.data["runs"][0]["frames"] == 3  # nothing was sent to render the model that does not load
    assert f"models/broken.mdx does not load: {sentence}" in printed.out
    assert "models/broken.mdx: a retry renders the same failure: fix the model, then run the job again" in printed.out
    assert "farm retry" not in printed.out + printed.err

    # the comparison's summary says it too, and recommends no retry
    assert farm("approve", job_id, "--trace", "crate.mdx", "--out", "out", "--goldens", "goldens") == 0
    capsys.readouterr()
    assert farm("compare", job_id, "--out", "out", "--goldens", "goldens", "-o", "report") == 1
    out = capsys.readouterr().out
    assert f"error    {broken_key}: The frame did not render: models/broken.mdx does not load: {sentence}" in out
    assert f"problem: models/broken.mdx does not load: {sentence}; a retry renders the same failure: fix" in out
    assert "farm retry" not in out
    md = (job_dir / "report" / "summary.md").read_text()
    assert md.count("- models/broken.mdx does not load: ") == 1 and "farm retry" not in md

    # farm retry --failed: nothing a retry can fix; nothing sent, the frame stays failed with its cause
    assert farm("retry", job_id, "--failed", "--out", "out", "--no-progress") == 1
    printed = capsys.readouterr()
    assert "farm retry: nothing a retry can fix for models/broken.mdx, which does not load: a retry renders the same" \
           " failure: fix the model" in printed.err
    assert "rerun with" not in printed.out
    job = JobState.load(job_id, job_dir / "out")
    assert len(job.data["runs"]) == 1 and job.traces[broken_key]["cause"] == UNLOADABLE

    # once the model is fixed, the retry plans it again and renders it
    shutil.copy(job_dir / "models" / "crate.mdx", job_dir / "models" / "broken.mdx")
    assert farm("retry", job_id, "--failed", "--out", "out", "--no-progress") == 0
    job = JobState.load(job_id, job_dir / "out")
    fixed = sorted(k for k in job.traces if k.startswith("models/broken.mdx|"))
    assert [k.split("|")[1] for k in fixed] == ["Death", "Spin", "Stand"]
    assert all(job.traces[k]["status"] == "done" and "cause" not in job.traces[k] for k in fixed)
