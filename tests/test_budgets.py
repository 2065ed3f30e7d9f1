"""Budgets while a batch runs (farm.run.budget), caps when a job is planned, and the one-sentence
errors of the command line: an input that still explodes fails its own frames, the job goes on,
and a value the farm cannot use is refused before anything runs."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from farm.cli import main  # noqa: E402
from farm.plan.manifest import ManifestError  # noqa: E402
from farm.run.budget import Budgets, FrameTimeout, frame_deadline, over_budget  # noqa: E402
from farm.run.jobs import run_job  # noqa: E402
from renderer.errors import FormatError  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("budgets")
    write_samples(root / "models")
    for name in ("slow", "hog"):
        shutil.copy(root / "models" / "filter_modes.mdx", root / "models" / f"{name}.mdx")
    return root


def test_frame_deadline_interrupts_python_and_names_the_budget():
    t0 = time.monotonic()
    with pytest.raises(FrameTimeout), frame_deadline(0.2):
        while True:
            pass
    assert time.monotonic() - t0 < 2
    with frame_deadline(0):  # off
        pass
    b = Budgets(frame_seconds=7, memory_mib=99)
    assert over_budget(FrameTimeout(), b) == "the frame took longer than the frame time limit of 7 s" \
                                             " (FARM_FRAME_TIME_LIMIT)"
    assert "limit of 99 MiB per worker process (FARM_MEMORY_LIMIT_MB)" in over_budget(MemoryError("x"), b)
    assert over_budget(ValueError("x"), b) is None
    assert Budgets.from_env({"FARM_FRAME_TIME_LIMIT": "3", "FARM_MEMORY_LIMIT_MB": "0"}) == Budgets(3, 0)
    with pytest.raises(ValueError, match="FARM_FRAME_TIME_LIMIT must be an integer, not 'soon'"):
        Budgets.from_env({"FARM_FRAME_TIME_LIMIT": "soon"})


def budget_renderer(monkeypatch, **limits) -> None:
    """Workers of this test's jobs render with tests/budget_renderer.py under these FARM_* limits."""
    monkeypatch.setenv("FARM_RENDERER", "budget_renderer:factory")
    for name, value in limits.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))


def test_a_frame_over_its_time_or_memory_budget_fails_alone(models, tmp_path, monkeypatch):
    manifest = models / "job.toml"
    manifest.write_text('name = "budgets"\nsize = "32x32"\ntimestamps = [0, 100]\n'
                        '[[models]]\npaths = ["models/crate.mdx", "models/slow.mdx", "models/hog.mdx"]\n')
    budget_renderer(monkeypatch, FARM_FRAME_TIME_LIMIT=2, FARM_MEMORY_LIMIT_MB=1024)
    t0 = time.monotonic()
    job = run_job(manifest, out=tmp_path / "out", workers=1, broker="local", progress=False)
    took = time.monotonic() - t0
    by_model: dict[str, set] = {}
    for key, t in job.traces.items():
        by_model.setdefault(key.split("|")[0], set()).add((t["status"], t["error"]))
    assert {s for s, _ in by_model["models/crate.mdx"]} == {"done"}
    slow = by_model["models/slow.mdx"]
    assert {s for s, _ in slow} == {"failed"} and all(
        "slow.mdx at" in e and "frame time limit of 2 s (FARM_FRAME_TIME_LIMIT)" in e for _, e in slow), slow
    hog = by_model["models/hog.mdx"]
    assert {s for s, _ in hog} == {"failed"} and all(
        "limit of 1024 MiB per worker process (FARM_MEMORY_LIMIT_MB)" in e for _, e in hog), hog
    assert took < 60, f"the job took {took:.0f} s"


def test_memory_growing_in_small_steps_fails_each_frame_on_the_memory_budget(models, tmp_path, monkeypatch):
    """Issue 23: a loop growing a list to the RLIMIT_DATA cap left the worker at the cap at 100% CPU,
    past the frame time limit, until the runner killed it (and the batch "died"); now each frame
    fails on the memory budget while there is room to unwind, and the next frame runs."""
    shutil.copy(models / "models" / "filter_modes.mdx", models / "models" / "grow.mdx")
    manifest = models / "grow.toml"
    manifest.write_text('name = "grow"\nsize = "16x16"\ntimestamps = [0, 100, 200]\n'
                        '[[models]]\npaths = ["models/crate.mdx", "models/grow.mdx"]\n')
    budget_renderer(monkeypatch, FARM_FRAME_TIME_LIMIT=30, FARM_MEMORY_LIMIT_MB=700, FARM_STALL_GRACE_S=1)
    job = run_job(manifest, out=tmp_path / "out", workers=1, broker="local", progress=False)
    status = [(k.split("|")[0], t["status"], t["error"]) for k, t in job.traces.items()]
    assert {s for m, s, _ in status if m == "models/crate.mdx"} == {"done"}
    grow = [(s, e) for m, s, e in status if m == "models/grow.mdx"]
    assert len(grow) >= 3 and all(
        s == "failed" and "grow.mdx at" in e and "limit of 700 MiB per worker process (FARM_MEMORY_LIMIT_MB)" in e
        for s, e in grow), grow


def test_a_worker_stuck_where_no_signal_reaches_is_stopped_and_its_batch_fails(models, tmp_path, monkeypatch):
    shutil.copy(models / "models" / "filter_modes.mdx", models / "models" / "stuck.mdx")
    manifest = models / "stuck.toml"
    manifest.write_text('name = "stuck"\nsize = "16x16"\ntimestamps = [0]\n'
                        '[[models]]\npaths = ["models/crate.mdx", "models/stuck.mdx"]\n')
    budget_renderer(monkeypatch, FARM_FRAME_TIME_LIMIT=1, FARM_STALL_GRACE_S=1)
    t0 = time.monotonic()
    job = run_job(manifest, out=tmp_path / "out", workers=2, broker="local", progress=False)
    took = time.monotonic() - t0
    status = [(k.split("|")[0], t["status"], t["error"]) for k, t in job.traces.items()]  # every trace
    assert {s for m, s, _ in status if m == "models/crate.mdx"} == {"done"}
    stuck = [(s, e) for m, s, e in status if m == "models/stuck.mdx"]
    assert stuck and all(s == "failed" and "died 3 times" in e for s, e in stuck), stuck
    assert took < 90, f"{took:.0f} s"


def test_plans_are_capped_before_they_are_built(models, monkeypatch):
    monkeypatch.setenv("FARM_MAX_FRAMES", "50")
    m = models / "every.toml"
    m.write_text('size = "8x8"\nevery = 1\n[[models]]\npath = "models/crate.mdx"\n')
    from farm.plan.batches import expand_manifest
    from farm.plan.manifest import load_manifest

    with pytest.raises(ManifestError, match=r"every\.toml:3: models/crate\.mdx: every = 1 over a sequence of \d+ ms"
                                            r" is [\d,]+ frames, more than the cap of 50 per job \(FARM_MAX_FRAMES\)"):
        expand_manifest(load_manifest(m))
    huge = models / "huge.toml"
    huge.write_text(f'size = "8x8"\ntimestamps = [{2**63 - 1}]\n[[models]]\npath = "models/crate.mdx"\n')
    with pytest.raises(ManifestError, match=r"huge\.toml:2: 'timestamps' must be between 0 and 9007199254740992"):
        load_manifest(huge)
    monkeypatch.setenv("FARM_MAX_FRAMES", "many")
    with pytest.raises(ValueError, match="FARM_MAX_FRAMES must be an integer"):
        expand_manifest(load_manifest(m))  # its own manifest: job.toml is another test's (a slow one)


@pytest.mark.parametrize("args, words", [
    (["--every", "-5"], "--every must be a whole number of ms >= 1, not -5"),
    (["--every", "0"], "--every must be a whole number of ms >= 1, not 0"),
    (["--times", ","], "--times must be whole ms separated by commas"),
    (["--times", "1,,2"], "--times must be whole ms separated by commas"),
    (["--time", str(2**60)], "--time must be between 0 and 9007199254740992"),
    (["--assets", "/nonexistent/x"], "--assets: asset root '/nonexistent/x' is not a folder"),
    (["--camera", "nan,0,0:0,0,0"], "--camera: an explicit camera is"),
    (["--camera", "1,1,1:1,1,1"], "--camera: the eye and the target are the same point"),
    (["--camera", "0,0,0:1,0,0:2,0,0"], "--camera: the up vector is zero or along the view direction"),
    (["--background", "red"], "--background must be \"transparent\" or \"#rrggbb\""),
])
def test_render_refuses_what_it_cannot_use_in_one_sentence(models, tmp_path, capsys, args, words):
    out = tmp_path / "x.png"
    assert main(["render", str(models / "models" / "crate.mdx"), "-o", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and err.count("\n") == 1, err
    assert not out.exists()


def test_bad_team_and_outputs_are_one_sentence(models, tmp_path, capsys):
    crate = str(models / "models" / "crate.mdx")
    with pytest.raises(SystemExit) as e:  # argparse: usage line and the sentence, exit 2
        main(["render", crate, "-o", str(tmp_path / "a.png"), "--team", "99"])
    assert e.value.code == 2 and "--team must be between 0 and 27, not 99" in capsys.readouterr().err
    folder = tmp_path / "a-folder.png"
    folder.mkdir()
    assert main(["render", crate, "-o", str(folder), "--size", "16x16"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {folder}: is a folder; name a file to write\n", err
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # root: permissions do not stop us; a file as a folder does
            blocker = tmp_path / "file"
            blocker.write_text("x")
            target = blocker / "x.png"
        else:
            target = locked / "x.png"
        assert main(["render", crate, "-o", str(target), "--size", "16x16"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    finally:
        locked.chmod(0o700)


def test_bad_halo_options_are_one_sentence(tmp_path, capsys):
    corpus = Path(__file__).resolve().parents[2] / "shared" / "corpus"
    tags = sorted(corpus.rglob("*.gbxmodel")) + sorted(corpus.rglob("*.model"))
    if not tags:
        pytest.skip("no Halo model tags in ../shared/corpus")
    for flag, value, words in (("--lod", "bad", "unknown LOD 'bad'"), ("--lod", "9", "LOD index 9 is outside"),
                               ("--permutation", "nope", "nope"), ("--regions", "nope", "nope")):
        assert main(["render", str(tags[0]), "-o", str(tmp_path / "h.png"), "--size", "16x16", flag, value]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {tags[0]}: ") and words in err and err.count("\n") == 1, (flag, err)


def test_a_whole_file_problem_reads_path_colon_problem():
    e = FormatError("m.mdx", "", None, "cannot read file: No such file or directory")
    assert e.sentence() == "m.mdx: cannot read file: No such file or directory"
    assert FormatError("m.mdx", "chunk GEOS", 20, "too short").sentence() == "m.mdx: chunk GEOS at byte 20: too short"


def test_the_job_cap_is_the_coordinators_memory(models, monkeypatch, tmp_path):
    """Issue 33 item 2: without FARM_MAX_FRAMES a job may plan what the coordinator's memory holds
    (at PLAN_BYTES_PER_FRAME a frame), a million frames on a machine with a few GB; more is a
    ManifestError at the line that went over, naming the memory; FARM_MAX_FRAMES still caps by count."""
    from farm.plan import batches as B
    from farm.plan.manifest import load_manifest

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       8000000 kB\nMemFree:  100 kB\nMemAvailable:   4000000 kB\n")
    assert B._meminfo_available(str(meminfo)) == 4000000 * 1024
    assert B._meminfo_available(str(tmp_path / "none")) is None
    cg = tmp_path / "cg"
    cg.mkdir()
    (cg / "memory.max").write_text("max\n")
    (cg / "memory.current").write_text("1000\n")
    assert B._cgroup_available(str(cg)) is None
    (cg / "memory.max").write_text("5000\n")
    assert B._cgroup_available(str(cg)) == 4000
    monkeypatch.delenv("FARM_MAX_FRAMES", raising=False)
    monkeypatch.setattr(B, "_cgroup_available", lambda: None)
    monkeypatch.setattr(B, "_meminfo_available", lambda: 4 << 30)
    limit, _ = B.frame_limit()
    assert limit == (4 << 30) // B.PLAN_BYTES_PER_FRAME and limit > 1_000_000  # the old count cap was 200,000
    monkeypatch.setattr(B, "_meminfo_available", lambda: 30 * B.PLAN_BYTES_PER_FRAME)
    m = models / "memory.toml"
    m.write_text('size = "8x8"\ntimestamps = [0, 100, 200, 300, 400, 500, 600, 700, 800, 900]\n'
                 '[[models]]\npath = "models/crate.mdx"\n[[models]]\npath = "models/hog.mdx"\n'
                 '[[models]]\npath = "models/slow.mdx"\n')
    with pytest.raises(ManifestError, match=r"memory\.toml:\d+: the job plans [\d,]+ frames by models/hog\.mdx, more"
                                            r" than the 30 frames this coordinator's memory holds \(0 MB available"):
        B.expand_manifest(load_manifest(m))
    monkeypatch.setattr(B, "_meminfo_available", lambda: 4 << 30)
    assert len(B.expand_manifest(load_manifest(m)).traces) > 30
    monkeypatch.setenv("FARM_MAX_FRAMES", "30")  # a count cap still applies when set
    with pytest.raises(ManifestError, match=r"more than the cap of 30 per job \(FARM_MAX_FRAMES\)"):
        B.expand_manifest(load_manifest(m))


def test_planned_traces_share_their_thresholds(models):
    """A million planned frames hold one thresholds object per set of matching entries, not one each
    (never changed in place); the values are what each trace's entries say."""
    from farm.plan.batches import expand_manifest
    from farm.plan.manifest import load_manifest

    m = models / "shared.toml"
    m.write_text('size = "8x8"\ntimestamps = [0, 100, 200]\n[thresholds]\nssim = 0.9\n'
                 '[[thresholds.traces]]\nmatch = "*|100ms|*"\nssim = 0.5\n'
                 '[[models]]\npath = "models/crate.mdx"\n')
    traces = expand_manifest(load_manifest(m)).traces
    by_time = {}
    for t in traces.values():
        by_time.setdefault(t["time_ms"], []).append(t["thresholds"])
    assert {ms: {th["min_ssim"] for th in ths} for ms, ths in by_time.items()} == {0: {0.9}, 100: {0.5}, 200: {0.9}}
    assert len({id(t["thresholds"]) for t in traces.values()}) == 2
